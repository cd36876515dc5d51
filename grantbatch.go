package fence

import (
	"crypto"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"math/bits"
	"slices"
	"time"
)

// Batch signatures (docs/design.md §10). Under load the leader signs the
// grants that are ready together with one Ed25519 signature: over the root
// of a Merkle tree of their signing inputs, RFC 9162's tree shape with
// SHA-256 (a leaf is SHA-256 of a zero byte, the grant's salt, its index
// in the batch and its SigningInput; an inner node SHA-256 of a one byte
// and its two children), and the batch's size. Each grant then carries
// its inclusion proof: its salt, its index, the batch's size and the path
// of sibling hashes to the root. A verifier recomputes the leaf from the
// grant it reads, folds the path and checks the signature over the root
// and size. Index and size are signed, so a grant has one wire form. Forging a grant into a batch is
// finding a second preimage of SHA-256; the salt, 16 random bytes a
// grant, keeps a holder who sees its path from confirming a guess of
// another grant of the batch (their inputs are names and counters).

// MaxGrantBatch is the most grants one batch signature covers.
const MaxGrantBatch = 256

// grantSaltSize is the length of a batched grant's salt.
const grantSaltSize = 16

// grantBatchMagic opens what a batch signature is over: the format and
// its version, then the batch's size and the 32-byte root. It differs from signedGrantMagic in
// its 13th byte, so no message is both a grant's and a root's.
const grantBatchMagic = "fenced-grant-batch-v1\x00"

// signedGrantBatchPrefix opens the wire form of a batched grant.
const signedGrantBatchPrefix = "fg2."

// GrantBatchProof places a signed grant in the batch whose root its
// Signature is over (SignGrantBatch).
type GrantBatchProof struct {
	// Salt is the grant's random salt, hashed into its leaf.
	Salt [grantSaltSize]byte
	// Index is the grant's position in the batch, 0 to Size-1.
	Index int
	// Size is the number of grants in the batch, 2 to MaxGrantBatch.
	Size int
	// Path is the inclusion proof (RFC 9162 §2.1.3.1), the sibling
	// nearest the leaf first.
	Path [][sha256.Size]byte
}

// grantLeaf returns the leaf hash of a grant with its salt, its index in
// the batch and its signing input.
func grantLeaf(salt [grantSaltSize]byte, index int, input []byte) [sha256.Size]byte {
	h := sha256.New()
	h.Write([]byte{0})
	h.Write(salt[:])
	h.Write(binary.BigEndian.AppendUint16(nil, uint16(index)))
	h.Write(input)
	var out [sha256.Size]byte
	h.Sum(out[:0])
	return out
}

// grantNode returns the hash of an inner node with children l and r.
func grantNode(l, r [sha256.Size]byte) [sha256.Size]byte {
	var b [1 + 2*sha256.Size]byte
	b[0] = 1
	copy(b[1:], l[:])
	copy(b[1+sha256.Size:], r[:])
	return sha256.Sum256(b[:])
}

// batchRootMessage returns what the signature of a batch of size grants
// with root is over: grantBatchMagic, size as 2 bytes big-endian, root.
func batchRootMessage(size int, root [sha256.Size]byte) []byte {
	b := binary.BigEndian.AppendUint16([]byte(grantBatchMagic), uint16(size))
	return append(b, root[:]...)
}

// rootOf returns the root that p's path leads to from leaf, following RFC
// 9162 §2.1.3.2; it fails when the path does not fit the index and size
// (too short, too long, an index outside the batch).
func (p *GrantBatchProof) rootOf(leaf [sha256.Size]byte) ([sha256.Size]byte, error) {
	if p.Size < 2 || p.Size > MaxGrantBatch || p.Index < 0 || p.Index >= p.Size {
		return leaf, fmt.Errorf("%w: the batch proof places the grant at %d of %d; want a batch of 2 to %d", ErrInvalidGrant, p.Index, p.Size, MaxGrantBatch)
	}
	fn, sn := uint(p.Index), uint(p.Size-1)
	r := leaf
	for _, sib := range p.Path {
		if sn == 0 {
			return leaf, fmt.Errorf("%w: the batch proof's path is longer than a batch of %d has", ErrInvalidGrant, p.Size)
		}
		if fn&1 == 1 || fn == sn {
			r = grantNode(sib, r)
			for fn&1 == 0 && fn != 0 {
				fn, sn = fn>>1, sn>>1
			}
		} else {
			r = grantNode(r, sib)
		}
		fn, sn = fn>>1, sn>>1
	}
	if sn != 0 {
		return leaf, fmt.Errorf("%w: the batch proof's path is shorter than a batch of %d has", ErrInvalidGrant, p.Size)
	}
	return r, nil
}

// appendTo appends p's canonical bytes to dst: the salt, index and size as 2-byte
// big-endian numbers, then the path's hashes.
func (p *GrantBatchProof) appendTo(dst []byte) []byte {
	b := slices.Grow(dst, grantSaltSize+4+len(p.Path)*sha256.Size)
	b = append(b, p.Salt[:]...)
	b = binary.BigEndian.AppendUint16(b, uint16(p.Index))
	b = binary.BigEndian.AppendUint16(b, uint16(p.Size))
	for _, h := range p.Path {
		b = append(b, h[:]...)
	}
	return b
}

// decodeGrantBatchProof is the inverse of encode. Whether the path fits
// the index and size is checked when it is folded (rootOf).
func decodeGrantBatchProof(b []byte) (*GrantBatchProof, error) {
	if len(b) < grantSaltSize+4 || (len(b)-grantSaltSize-4)%sha256.Size != 0 {
		return nil, fmt.Errorf("%w: the batch proof is %d bytes; want %d and a multiple of %d", ErrInvalidGrant, len(b), grantSaltSize+4, sha256.Size)
	}
	p := &GrantBatchProof{
		Index: int(binary.BigEndian.Uint16(b[grantSaltSize:])),
		Size:  int(binary.BigEndian.Uint16(b[grantSaltSize+2:])),
	}
	copy(p.Salt[:], b)
	for rest := b[grantSaltSize+4:]; len(rest) > 0; rest = rest[sha256.Size:] {
		p.Path = append(p.Path, [sha256.Size]byte(rest[:sha256.Size]))
	}
	if _, err := p.rootOf([sha256.Size]byte{}); err != nil {
		return nil, err
	}
	return p, nil
}

// signedMessage returns what g's Signature is over: its SigningInput, or
// for a batched grant the root its proof leads to from it.
func (g SignedGrant) signedMessage() ([]byte, error) {
	input, err := g.SigningInput()
	if err != nil || g.Batch == nil {
		return input, err
	}
	root, err := g.Batch.rootOf(grantLeaf(g.Batch.Salt, g.Batch.Index, input))
	if err != nil {
		return nil, err
	}
	return batchRootMessage(g.Batch.Size, root), nil
}

// SignGrantBatch signs grants under keyID with signer as Sign does, with
// one signature for all of them when there are two or more: each grant
// returned has the same Signature, over the root of the batch, and its
// own Batch proof, with a salt read from salts (crypto/rand.Reader). One
// grant alone is signed as Sign signs it. There must be 1 to
// MaxGrantBatch grants, each one SigningInput accepts.
func SignGrantBatch(grants []SignedGrant, keyID string, signer crypto.Signer, salts io.Reader) ([]SignedGrant, error) {
	switch {
	case len(grants) == 0 || len(grants) > MaxGrantBatch:
		return nil, fmt.Errorf("%w: a batch signs 1 to %d grants, not %d", ErrInvalidArgument, MaxGrantBatch, len(grants))
	case len(grants) == 1:
		g, err := grants[0].SignWith(keyID, signer)
		return []SignedGrant{g}, err
	}
	out := make([]SignedGrant, len(grants))
	salt := make([]byte, grantSaltSize*len(grants))
	if _, err := io.ReadFull(salts, salt); err != nil {
		return nil, fmt.Errorf("sign grant batch: salts: %w", err)
	}
	leaves := make([][sha256.Size]byte, len(grants))
	proofs := make([]GrantBatchProof, len(grants))
	depth := bits.Len(uint(len(grants) - 1))
	paths := make([][sha256.Size]byte, len(grants)*depth)
	for i, g := range grants {
		g.KeyID = keyID
		g.IssuedAt = time.UnixMilli(g.IssuedAt.UnixMilli()).UTC()
		input, err := g.SigningInput()
		if err != nil {
			return nil, err
		}
		p := &proofs[i]
		p.Index, p.Size = i, len(grants)
		copy(p.Salt[:], salt[i*grantSaltSize:])
		p.Path = paths[i*depth : i*depth : (i+1)*depth]
		leaves[i] = grantLeaf(p.Salt, i, input)
		out[i] = g
	}
	root := batchTree(leaves, proofs)
	sig, err := signer.Sign(nil, batchRootMessage(len(grants), root), crypto.Hash(0))
	if err != nil {
		return nil, fmt.Errorf("sign grant batch: %w", err)
	}
	if len(sig) != ed25519.SignatureSize {
		return nil, fmt.Errorf("sign grant batch: the signature is %d bytes, want %d", len(sig), ed25519.SignatureSize)
	}
	for i := range out {
		out[i].Signature = sig
		out[i].Batch = &proofs[i]
	}
	return out, nil
}

// batchTree returns the root of the tree over leaves (RFC 9162 §2.1.1:
// the left subtree holds the largest power of two below their number) and
// appends to each proof's path its sibling at every level, the nearest
// first.
func batchTree(leaves [][sha256.Size]byte, proofs []GrantBatchProof) [sha256.Size]byte {
	if len(leaves) == 1 {
		return leaves[0]
	}
	k := 1 << (bits.Len(uint(len(leaves)-1)) - 1)
	left := batchTree(leaves[:k], proofs[:k])
	right := batchTree(leaves[k:], proofs[k:])
	for i := range proofs[:k] {
		proofs[i].Path = append(proofs[i].Path, right)
	}
	for i := range proofs[k:] {
		proofs[k+i].Path = append(proofs[k+i].Path, left)
	}
	return grantNode(left, right)
}

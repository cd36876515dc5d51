package fence

import (
	"strconv"
	"strings"
)

// Issuer epochs (docs/operations.md, "Restore"). A cluster created by
// bootstrap has a random issuer id, its epoch 1. A cluster restored from a
// snapshot of it is a new issuer: the same root with ".e" and the next
// epoch ("9f3a0c1d2e4b5a69.e2"), so a guard pinned to the old issuer can
// say that the token it refuses comes from a restore of its own cluster.
// Tokens of two epochs are not comparable, even though the restore started
// the new epoch's counter above a floor: a resource is re-pinned to the
// new issuer by its operator, who chose that floor.

// IssuerEpoch splits an issuer id into its root and epoch: "X.e3" is root
// X, epoch 3; an id without a valid epoch suffix is epoch 1 of itself.
func IssuerEpoch(issuer string) (root string, epoch uint64) {
	i := strings.LastIndex(issuer, ".e")
	if i <= 0 {
		return issuer, 1
	}
	n, err := strconv.ParseUint(issuer[i+2:], 10, 64)
	if err != nil || n < 2 || strconv.FormatUint(n, 10) != issuer[i+2:] {
		return issuer, 1
	}
	return issuer[:i], n
}

// NextIssuerEpoch returns the issuer id of a cluster restored from a
// snapshot of issuer: the same root, the next epoch.
func NextIssuerEpoch(issuer string) string {
	root, epoch := IssuerEpoch(issuer)
	return root + ".e" + strconv.FormatUint(epoch+1, 10)
}

package pggrant

import (
	"context"
	"errors"
	"fmt"
	"time"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/internal/grantkeep"
)

// held is a grant of a Grantor: its row names holder and its token.
type held struct {
	*grantkeep.Hold
	g      *Grantor
	grant  fence.Grant
	holder string
}

var _ fence.Held = (*held)(nil)

// renewSQL extends the grant by $4 milliseconds from the database's now,
// if it is still this holder's under this token and has not expired.
const renewSQL = `UPDATE fence_lock_grants SET expires_at = now() + $4 * interval '1 millisecond'
	WHERE name = $1 AND holder = $2 AND fencing_token = $3 AND expires_at > now()`

// releaseSQL ends the grant if it is still this holder's and live,
// notifies the waiters, and otherwise tells whether another holder has
// the name. The counter stays in the row.
const releaseSQL = `
WITH r AS (
	UPDATE fence_lock_grants SET holder = NULL, expires_at = now()
	WHERE name = $1 AND holder = $2 AND fencing_token = $3 AND expires_at > now()
	RETURNING name
), n AS (
	SELECT pg_notify('` + channel + `', name) FROM r
)
SELECT (SELECT count(*) FROM n) > 0,
	coalesce((SELECT holder IS NOT NULL AND holder <> $2 AND expires_at > now()
		FROM fence_lock_grants WHERE name = $1), false)`

// verifySQL tells whether the grant is the name's live grant.
const verifySQL = `SELECT EXISTS (SELECT 1 FROM fence_lock_grants
	WHERE name = $1 AND holder = $2 AND fencing_token = $3 AND expires_at > now())`

func (g *Grantor) newHeld(name, holder string, t fence.Token, grantedAt time.Time, ttl time.Duration, sent time.Time) *held {
	h := &held{g: g, holder: holder, grant: fence.Grant{
		Name: name, Kind: fence.KindLock, Scope: name, Token: t, Issuer: g.issuer, TTL: ttl, IssuedAt: grantedAt.UTC(),
	}}
	h.Hold = grantkeep.Start(sent, ttl, fmt.Sprintf("lock %q (token %d)", name, t), h.renew)
	context.AfterFunc(h.Context(), func() { g.forget(h) })
	return h
}

// Grant implements fence.Held.
func (h *held) Grant() fence.Grant { return h.grant }

func (h *held) renew(ctx context.Context) error {
	n, err := exec(ctx, h.g.pool, renewSQL, h.grant.Name, h.holder, int64(h.grant.Token), h.grant.TTL.Milliseconds())
	switch {
	case err != nil:
		return err
	case n == 0:
		return fmt.Errorf("%w: the table no longer has this grant: it expired and may have been granted again", fence.ErrLockLost)
	}
	return nil
}

// Release implements fence.Held.
func (h *held) Release(ctx context.Context) (fence.ReleaseResult, error) {
	h.End(fence.ErrReleased)
	o, wakeLocal := h.g.takeOffer(h.grant.Name, h.holder)
	if o != nil {
		if res, done, err := h.handOff(ctx, o); done {
			return res, err
		}
	}
	var released, other bool
	err := h.g.pool.QueryRow(ctx, releaseSQL, h.grant.Name, h.holder, int64(h.grant.Token)).Scan(&released, &other)
	switch {
	case err != nil:
		return "", fmt.Errorf("pggrant: release lock %q (token %d): %w; the grant ends with its TTL at the latest", h.grant.Name, h.grant.Token, err)
	case released:
		// A hint for this Grantor's own waiters, ahead of the NOTIFY's
		// trip through PostgreSQL: the grant statement they run decides.
		if wakeLocal {
			h.g.lis.wake(h.grant.Name)
		}
		return fence.Released, nil
	case other:
		return fence.NotOwned, nil
	}
	return fence.AlreadyReleased, nil
}

// Verify implements fence.Held.
func (h *held) Verify(ctx context.Context) error {
	if err := h.Err(); err != nil {
		if !errors.Is(err, fence.ErrLockLost) {
			err = fmt.Errorf("%w: %w", fence.ErrLockLost, err)
		}
		return fmt.Errorf("pggrant: verify lock %q (token %d): %w", h.grant.Name, h.grant.Token, err)
	}
	var ok bool
	if err := h.g.pool.QueryRow(ctx, verifySQL, h.grant.Name, h.holder, int64(h.grant.Token)).Scan(&ok); err != nil {
		return fmt.Errorf("pggrant: verify lock %q (token %d): %w", h.grant.Name, h.grant.Token, err)
	}
	if !ok {
		return fmt.Errorf("pggrant: verify lock %q (token %d): %w: the table's current grant is not this one", h.grant.Name, h.grant.Token, fence.ErrLockLost)
	}
	return nil
}

// Renew implements fence.Held.
func (h *held) Renew(ctx context.Context) error {
	if err := h.Hold.Renew(ctx); err != nil {
		return fmt.Errorf("pggrant: %w", err)
	}
	return nil
}

package guard_test

import (
	"context"
	"testing"

	"github.com/fenced-dev/fenced/guard"
)

func TestOutgoingFromContext(t *testing.T) {
	bg := context.Background()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		want guard.Outgoing
		ok   bool
	}{
		{"none", bg, guard.Outgoing{}, false},
		{"token", guard.WithOutgoingToken(bg, "obj", 4), guard.Outgoing{Object: "obj", Token: 4}, true},
		{"issuer alone", guard.WithOutgoingIssuer(bg, "c1"), guard.Outgoing{Issuer: "c1"}, false},
		{"token, then issuer", guard.WithOutgoingIssuer(guard.WithOutgoingToken(bg, "obj", 4), "c1"), guard.Outgoing{Object: "obj", Token: 4, Issuer: "c1"}, true},
		{"issuer kept by a later token", guard.WithOutgoingToken(guard.WithOutgoingIssuer(guard.WithOutgoingToken(bg, "a", 1), "c1"), "", 2), guard.Outgoing{Token: 2, Issuer: "c1"}, true},
		{"served fence is not sent", guard.ContextWithIssuer(guard.WithFence(bg, "obj", 9, nil), "c1"), guard.Outgoing{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := guard.OutgoingFromContext(tc.ctx)
			if got != tc.want || ok != tc.ok {
				t.Fatalf("OutgoingFromContext()=%+v, %v; want %+v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
	if _, _, ok := guard.TokenFrom(guard.WithOutgoingToken(bg, "obj", 4)); ok {
		t.Error("TokenFrom found a fence in a client's outgoing context")
	}
}

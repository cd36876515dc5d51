package grpcfence_test

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/grpcfence"
	"github.com/fenced-dev/fenced/guard"
	"github.com/fenced-dev/fenced/guard/guardtest"
)

// TestSigned_Metadata: behind guard.Signed a call needs the signed grant
// in x-fencing-grant (WithGrant sends it); a grant of another scope, none,
// or two are refused with PermissionDenied INVALID_GRANT, and nothing is
// written. Without Signed, plain x-fencing-token keeps working.
func TestSigned_Metadata(t *testing.T) {
	is := guardtest.NewIssuer("cluster-a", 7)
	for _, s := range setups {
		t.Run(s.name, func(t *testing.T) {
			ts := newServer(t, s, grpcfence.Config{}, func(g fence.Guard) fence.Guard { return guard.Signed(g, is.Keys()) })
			cc := dial(t, ts.addr, true)
			ctx := testContext(t)
			call := func(ctx context.Context, value string) error {
				return cc.Invoke(ctx, methodAppend, wrapperspb.String(value), new(wrapperspb.StringValue))
			}
			grant := fence.Grant{Name: "a", Token: 5, Issuer: is.ID, Signed: is.Sign(t, "a", 5)}
			if err := call(grpcfence.WithGrant(ctx, "a", grant), "ok"); err != nil {
				t.Fatalf("a call with its signed grant: %v", err)
			}
			for name, c := range map[string]context.Context{
				"grant of scope b for object a": grpcfence.WithGrant(ctx, "a", fence.Grant{Token: 6, Issuer: is.ID, Signed: is.Sign(t, "b", 6)}),
				"no grant":                      grpcfence.WithToken(ctx, "a", 6),
				"two grants": metadata.AppendToOutgoingContext(grpcfence.WithToken(ctx, "a", 6),
					grpcfence.MetadataGrant, is.Sign(t, "a", 6), grpcfence.MetadataGrant, is.Sign(t, "a", 6)),
			} {
				err := call(c, "attack")
				if status.Code(err) != codes.PermissionDenied || !errors.Is(err, fence.ErrInvalidGrant) {
					t.Errorf("%s: %v, want PermissionDenied matching fence.ErrInvalidGrant", name, err)
				}
			}
			if v, mark := ts.o.read("a"); v != "ok" || mark != 5 {
				t.Fatalf("object a is %q at %d after the attacks, want \"ok\" at 5", v, mark)
			}
		})
	}
	plain := newServer(t, setups[0], grpcfence.Config{})
	if _, err := appendValue(testContext(t), dial(t, plain.addr, true), "a", 3, "plain"); err != nil {
		t.Fatalf("a plain x-fencing-token call without Signed: %v", err)
	}
}

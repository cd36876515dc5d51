package checker

import (
	"fmt"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/check/history"
)

// SignedGrants checks the signed grants handed out (docs/design.md §10,
// signed grants and their batches): every OK acquire that came with a
// signed grant (Op.Signed) must have been handed the grant of its own
// token, kind and scope ("not its own"), and, when the history holds the
// cluster's published keys (an OpSigningKeys), that grant must verify with
// them ("does not verify"). A grant in a batch signed for another holder,
// handed to the wrong caller, is what this catches; a grant that does not
// parse is "malformed". Acquires without a signed grant (signing off) are
// not judged. Violations have Check "signed-grant".
func SignedGrants(h history.History) []Violation {
	v := newViolationSet(SignedGrantCheck)
	var keys *fence.KeySet
	for _, op := range h {
		if op.Kind == history.OpSigningKeys && op.Outcome == history.OK {
			ks, err := fence.LoadKeySet([]byte(op.Value))
			if err != nil {
				v.add("keys", fmt.Sprintf("the cluster's published keys do not load: %v (%s)", err, opLabel(op)), op)
				continue
			}
			keys = ks
		}
	}
	for _, op := range h {
		if op.Kind != history.OpAcquire || op.Outcome != history.OK || op.Signed == "" {
			continue
		}
		var sg fence.SignedGrant
		var err error
		if keys != nil {
			sg, err = keys.VerifyGrant(op.Signed)
		} else {
			sg, err = fence.ParseSignedGrant(op.Signed)
		}
		if err != nil {
			rule := "does not verify"
			if _, perr := fence.ParseSignedGrant(op.Signed); perr != nil {
				rule = "malformed"
			}
			v.add(rule, fmt.Sprintf("%s was handed a signed grant that a resource behind guard.Signed refuses: %v (%s)", grantObject(op), err, opLabel(op)), op)
			continue
		}
		if sg.Token != fence.Token(op.Token) || string(sg.Kind) != kindName(op) || sg.Scope != grantScope(op) {
			v.add("not its own", fmt.Sprintf("%s was handed the signed grant of %s %q token %d, not of its own %s %q token %d (%s)",
				grantObject(op), sg.Kind, sg.Scope, sg.Token, kindName(op), grantScope(op), op.Token, opLabel(op)), op)
		}
	}
	return v.list()
}

package guard_test

import (
	"errors"
	"strings"
	"testing"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/guard"
)

var testFields = guard.Fields{Token: "X-Fencing-Token", Object: "X-Resource-Id", Issuer: "X-Fencing-Issuer", Kind: "header", Plural: "headers"}

// values returns a lookup over fields given as name -> values.
func values(m map[string][]string) func(string) []string {
	return func(k string) []string { return m[k] }
}

func TestParsePresented(t *testing.T) {
	for _, tt := range []struct {
		name   string
		fields map[string][]string
		want   guard.Presented
		is     error
		msg    string
	}{
		{"all three", map[string][]string{"X-Fencing-Token": {"7"}, "X-Resource-Id": {"obj"}, "X-Fencing-Issuer": {"c1"}}, guard.Presented{Token: 7, Object: "obj", Issuer: "c1"}, nil, ""},
		{"token only", map[string][]string{"X-Fencing-Token": {"7"}}, guard.Presented{Token: 7}, nil, ""},
		{"missing token", map[string][]string{"X-Resource-Id": {"obj"}}, guard.Presented{}, fence.ErrInvalidToken, "missing X-Fencing-Token header; a PUT here needs"},
		{"empty token", map[string][]string{"X-Fencing-Token": {""}}, guard.Presented{}, fence.ErrInvalidToken, "token is empty"},
		{"two tokens", map[string][]string{"X-Fencing-Token": {"7", "8"}}, guard.Presented{}, fence.ErrInvalidToken, "2 X-Fencing-Token headers; send one"},
		{"two equal tokens", map[string][]string{"X-Fencing-Token": {"7", "7"}}, guard.Presented{}, fence.ErrInvalidToken, "2 X-Fencing-Token headers"},
		{"two objects", map[string][]string{"X-Fencing-Token": {"7"}, "X-Resource-Id": {"a", "b"}}, guard.Presented{}, fence.ErrInvalidArgument, "2 X-Resource-Id headers; send one, naming the object"},
		{"three issuers", map[string][]string{"X-Fencing-Token": {"7"}, "X-Fencing-Issuer": {"a", "a", "a"}}, guard.Presented{}, fence.ErrInvalidToken, "3 X-Fencing-Issuer headers"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := guard.ParsePresented(values(tt.fields), testFields, "a PUT here")
			if tt.is == nil {
				if err != nil || got != tt.want {
					t.Fatalf("got %+v, %v; want %+v", got, err, tt.want)
				}
				return
			}
			if !errors.Is(err, tt.is) || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("error %v, want %v mentioning %q", err, tt.is, tt.msg)
			}
		})
	}
}

// FuzzParsePresented parses fields given as '|'-separated values: it never
// panics; it succeeds only when the token was sent once and parses and the
// object and issuer were sent at most once, and then returns those values;
// its errors match ErrInvalidToken or, for the object, ErrInvalidArgument.
func FuzzParsePresented(f *testing.F) {
	f.Add("7", "obj", "c1")
	f.Add("7|8", "", "")
	f.Add("7", "a|b", "")
	f.Add("7", "", "a|b")
	f.Add("", "", "")
	f.Add("|", "|", "|")
	f.Add("99999999999999999999", "x", "y")
	f.Fuzz(func(t *testing.T, token, object, issuer string) {
		split := func(s string) []string {
			if s == "" {
				return nil
			}
			return strings.Split(s, "|")
		}
		m := map[string][]string{"X-Fencing-Token": split(token), "X-Resource-Id": split(object), "X-Fencing-Issuer": split(issuer)}
		p, err := guard.ParsePresented(values(m), testFields, "a PUT here")
		if err != nil {
			if !errors.Is(err, fence.ErrInvalidToken) && !errors.Is(err, fence.ErrInvalidArgument) {
				t.Fatalf("error %v matches neither ErrInvalidToken nor ErrInvalidArgument", err)
			}
			return
		}
		if len(m["X-Fencing-Token"]) != 1 || len(m["X-Resource-Id"]) > 1 || len(m["X-Fencing-Issuer"]) > 1 {
			t.Fatalf("accepted repeated fields %v", m)
		}
		if want, err := fence.ParseToken(token); err != nil || p.Token != want {
			t.Fatalf("token %q parsed as %d (ParseToken: %d, %v)", token, p.Token, want, err)
		}
		if p.Object != object || p.Issuer != issuer {
			t.Fatalf("got object %q issuer %q, want %q %q", p.Object, p.Issuer, object, issuer)
		}
	})
}

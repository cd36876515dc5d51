package testserver

import (
	"bufio"
	"net/http"
	"strings"
	"testing"
)

// Metric returns the value of the sample line of the /metrics of the
// server at addr that starts with name (labels included), or "" when it
// has none.
func Metric(t testing.TB, addr, name string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return v
		}
	}
	return ""
}

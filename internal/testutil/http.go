package testutil

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// Call sends method url with body and, unless bearer is empty, an
// "Authorization: Bearer" header, and returns the status and the body. A
// request that cannot be sent or read fails the test.
func Call(t testing.TB, method, url, body, bearer string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatalf("testutil.Call: %v", err)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("testutil.Call %s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("testutil.Call %s %s: reading the body: %v", method, url, err)
	}
	return resp.StatusCode, string(raw)
}

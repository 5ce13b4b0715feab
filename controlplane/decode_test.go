package controlplane

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/felixmq/felix/controlplane/api"
)

// FuzzCreateStreamBody feeds arbitrary bodies to the create-stream
// endpoint: the answer is always a created stream that passes validation,
// or a JSON error with a code, a message and the request's id; never a
// panic, a 500 or a stream the validation would refuse.
func FuzzCreateStreamBody(f *testing.F) {
	for _, seed := range []string{
		`{"stream":"orders","shards":4,"durable":true,"fsync":"on_commit","retention_bytes":1048576}`,
		`{"stream":"x","shards":0}`, `{"stream":"a/b"}`, `{"stream":"x",}`, `{"stream":"x"} {}`,
		`{"stream":"x","shards":"4"}`, `[1]`, ``, `null`, `{"tenant":"t2","stream":"x"}`,
		`{"stream":"x","durable":false,"fsync":"never"}`, `{"stream":"x","revision":1}`,
	} {
		f.Add(seed)
	}
	srv, err := New(Config{Authorizer: AuthorizerFunc(func(*http.Request, string, string) error { return nil })})
	if err != nil {
		f.Fatal(err)
	}
	defer srv.Close()
	for _, path := range []string{"/v1/tenants", nsURL} {
		body := `{"tenant":"t1"}`
		if path == nsURL {
			body = `{"namespace":"ns"}`
		}
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, httptest.NewRequest("POST", path, strings.NewReader(body)))
	}
	f.Fuzz(func(t *testing.T, body string) {
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, httptest.NewRequest("POST", streamsURL, strings.NewReader(body)))
		switch w.Code {
		case http.StatusCreated:
			var s streamRes
			if err := json.Unmarshal(w.Body.Bytes(), &s); err != nil {
				t.Fatalf("201 with a body that is not a stream: %v", err)
			}
			s.Revision = 0
			if err := s.validate(); err != nil {
				t.Fatalf("created a stream validation refuses: %v (%+v)", err, s)
			}
		case http.StatusBadRequest, http.StatusConflict, http.StatusRequestEntityTooLarge:
			var e api.ErrorBody
			if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Code == "" || e.Message == "" ||
				e.RequestID != w.Header().Get(RequestIDHeader) {
				t.Fatalf("error body %q is not a complete ErrorBody (%v)", w.Body.String(), err)
			}
		default:
			t.Fatalf("status %d for body %q: %s", w.Code, body, w.Body.String())
		}
	})
}

package controlplane

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// decodeBody decodes exactly one JSON object from the request body into v,
// refusing unknown fields, and explains a failure precisely enough for the
// caller to fix the request without reading the server's source.
func (s *Server) decodeBody(w http.ResponseWriter, r *http.Request, v any) error {
	body := http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes)
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	// A second value ("{}{}") or trailing garbage is a malformed request,
	// not something to ignore.
	if _, err := dec.Token(); err != io.EOF {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return err
		}
		return invalid("malformed JSON: unexpected data after the object at byte offset %d", dec.InputOffset())
	}
	return nil
}

func jsonError(err error) error {
	var (
		syntax *json.SyntaxError
		typ    *json.UnmarshalTypeError
		tooBig *http.MaxBytesError
	)
	switch {
	case errors.As(err, &tooBig):
		return err
	case errors.Is(err, io.EOF):
		return invalid("empty body: want a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return invalid("malformed JSON: body ends in the middle of a value")
	case errors.As(err, &syntax):
		// Offset counts the bytes read, the offending one included;
		// report the offending byte's own (0-based) offset.
		return invalid("malformed JSON at byte offset %d: %s", max(syntax.Offset-1, 0), syntax.Error())
	case errors.As(err, &typ):
		if typ.Field == "" {
			return invalid("body is a JSON %s: want a JSON object", typ.Value)
		}
		return invalid("field %q: want %s, got JSON %s", typ.Field, jsonTypeName(typ.Type.Kind().String()), typ.Value)
	}
	// encoding/json reports unknown fields with an untyped error whose text
	// is its only carrier of the field name.
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return invalid("unknown field %s", name)
	}
	return invalid("malformed JSON: %v", err)
}

func jsonTypeName(goKind string) string {
	switch {
	case strings.HasPrefix(goKind, "int"), strings.HasPrefix(goKind, "uint"):
		return "an integer"
	case goKind == "string":
		return "a string"
	case goKind == "bool":
		return "a boolean"
	}
	return goKind
}

// queryInt parses an optional integer query parameter within [min, max].
func queryInt(r *http.Request, name string, def, min, max int64) (int64, error) {
	s := r.URL.Query().Get(name)
	if s == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, invalid("query parameter %s=%q: want an integer in [%d, %d]", name, s, min, max)
	}
	if n < min || n > max {
		return 0, invalid("query parameter %s=%d: not in [%d, %d]", name, n, min, max)
	}
	return n, nil
}

// queryDuration parses an optional duration query parameter ("30s",
// "500ms") within [0, max].
func queryDuration(r *http.Request, name string, max time.Duration) (time.Duration, error) {
	s := r.URL.Query().Get(name)
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, invalid("query parameter %s=%q: want a duration such as 30s or 500ms", name, s)
	}
	if d < 0 || d > max {
		return 0, invalid("query parameter %s=%s: not in [0s, %s]", name, s, max)
	}
	return d, nil
}

package main

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"strconv"
	"unicode"
	"unicode/utf8"
)

// printable is payload as text when it is valid UTF-8 without control
// characters (so one event stays one line), else 0x and its hex.
func printable(payload []byte) string {
	if utf8.Valid(payload) {
		ok := true
		for _, r := range string(payload) {
			if unicode.IsControl(r) {
				ok = false
				break
			}
		}
		if ok {
			return string(payload)
		}
	}
	return "0x" + hex.EncodeToString(payload)
}

// payloadFields puts b into a --json object: "NAME" as a string when it is
// UTF-8, else "NAME_base64".
func payloadFields(obj map[string]any, name string, b []byte) map[string]any {
	if utf8.Valid(b) {
		obj[name] = string(b)
	} else {
		obj[name+"_base64"] = base64.StdEncoding.EncodeToString(b)
	}
	return obj
}

// writeJSONLine writes v as one line of JSON (--json output).
func writeJSONLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// plural is "1 message", "3 messages".
func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
}

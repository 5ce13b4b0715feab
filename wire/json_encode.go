package wire

import (
	"encoding/base64"
	"strconv"
	"unicode/utf8"
)

// The JSON encoders are hand-written appends rather than encoding/json
// because the output must match serde_json byte for byte (the golden
// vectors are serde output) and encoding/json differs: it escapes <, > and &,
// writes \u2028/\u2029 escaped, and orders map keys. They also cost no
// reflection and no allocation beyond growing dst.

// AppendJSONFrame appends a whole JSON frame (flags 0): it reserves the
// header, appends m's JSON and patches the length in.
//
// It panics if the JSON exceeds 4 GiB: a control message that size is a
// caller bug, and senders must respect the peer's frame cap (16 MiB by
// default) anyway.
func AppendJSONFrame(dst []byte, m Message) []byte {
	dst, start := beginFrame(dst, 0)
	dst = m.AppendJSON(dst)
	dst, err := endFrame(dst, start)
	if err != nil {
		panic("wire: JSON message over 4 GiB")
	}
	return dst
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string escaped the way serde_json does:
// `"` and `\` backslash-escaped; \b \f \n \r \t short forms; other bytes
// below 0x20 as \u00xx with lowercase hex; everything else (DEL, <>&,
// U+2028, all non-ASCII) raw. serde strings are always valid UTF-8, so
// invalid bytes in s become U+FFFD (as encoding/json does) to keep the
// output valid JSON; the decoder rejects invalid UTF-8 rather than repair it.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r != utf8.RuneError || size != 1 {
				i += size
				continue
			}
			dst = append(dst, s[start:i]...)
			dst = append(dst, "\ufffd"...)
			i++
			start = i
			continue
		}
		dst = append(dst, s[start:i]...)
		dst = appendEscape(dst, c)
		i++
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

func appendEscape(dst []byte, c byte) []byte {
	switch c {
	case '"', '\\':
		return append(dst, '\\', c)
	case '\b':
		return append(dst, '\\', 'b')
	case '\f':
		return append(dst, '\\', 'f')
	case '\n':
		return append(dst, '\\', 'n')
	case '\r':
		return append(dst, '\\', 'r')
	case '\t':
		return append(dst, '\\', 't')
	}
	return append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
}

// appendBase64 appends b as a JSON string of standard padded base64.
func appendBase64(dst, b []byte) []byte {
	dst = append(dst, '"')
	dst = base64.StdEncoding.AppendEncode(dst, b)
	return append(dst, '"')
}

func appendBase64Array(dst []byte, bs [][]byte) []byte {
	dst = append(dst, '[')
	for i, b := range bs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendBase64(dst, b)
	}
	return append(dst, ']')
}

func appendUint(dst []byte, v uint64) []byte {
	return strconv.AppendUint(dst, v, 10)
}

// appendStrField appends `,"key":"value"`; key is a literal with its quotes
// and colon so the call sites read like the wire.
func appendStrField(dst []byte, key, v string) []byte {
	dst = append(dst, key...)
	return appendString(dst, v)
}

func appendUintField(dst []byte, key string, v uint64) []byte {
	dst = append(dst, key...)
	return appendUint(dst, v)
}

func appendOptUint(dst []byte, key string, v *uint64) []byte {
	if v == nil {
		return dst
	}
	return appendUintField(dst, key, *v)
}

// appendHead appends `{"type":"NAME"` for every message.
func appendHead(dst []byte, t MessageType) []byte {
	dst = append(dst, `{"type":"`...)
	dst = append(dst, t.String()...)
	return append(dst, '"')
}

// appendTopic appends the tenant_id, namespace and third scope field that
// most data messages start with.
func appendTopic(dst []byte, tenant, ns, key, name string) []byte {
	dst = appendStrField(dst, `,"tenant_id":`, tenant)
	dst = appendStrField(dst, `,"namespace":`, ns)
	return appendStrField(dst, key, name)
}

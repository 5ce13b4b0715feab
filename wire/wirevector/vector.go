// Package wirevector reads wire v1 golden vector files and checks the wire
// package against them. The wire tests and `felix wire check` share it, so a
// vector means the same thing to both.
//
// A vector file is a JSON object. Every vector has "name" and "frame_hex"
// (header + payload, lowercase hex); "payload_hex" is the payload alone and,
// when present, must match. The message is described either by
// "payload_json" (a JSON message, flags 0) or by "kind" plus the decoded
// fields of a binary layout:
//
//	binary_publish_batch        flags, tenant_id, namespace, stream, payloads_utf8|payloads_hex,
//	                            shard (0x8000), key_utf8|key_hex (0x0040)
//	binary_acked_publish_batch  + request_id, ack_mode ("per_message"|"per_batch"),
//	                            producer_id, sequence (0x0100)
//	binary_publish_ack          flags, status ("ok"|"error"), request_id, message (string|null),
//	                            code, retry (0x0200), reason, retry_after_ms (0x0400),
//	                            owner_node_id, owner_addr, owner_generation (0x0080),
//	                            offset (0x1000), shard (0x8000)
//	binary_event_batch          flags, subscription_id, base_offset (number|null), payloads_*,
//	                            publisher (0x2000), timestamps (0x4000), headers (0x0080)
//	binary_event_batch_shared   the same without subscription_id
//
// headers (publish batches with 0x0080 as well) is one list per payload of
// [key, value] pairs, in order.
//
// The optional fields are present exactly when flags have their bit.
//
// A negative vector has "error" naming a wire sentinel ("ErrBadMagic") and
// optionally "max_frame" (the cap to decode with; 0 = default): decoding
// frame_hex must fail with that error. A NAME.hex file beside NAME.json, if
// present, must hold frame_hex.
package wirevector

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/felixmq/felix/wire"
)

// Vector is one vector file. Pointer fields distinguish absent from zero.
type Vector struct {
	Name        string  `json:"name,omitempty"`
	Kind        string  `json:"kind,omitempty"`
	Flags       *uint16 `json:"flags,omitempty"`
	PayloadJSON *string `json:"payload_json,omitempty"`

	RequestID      *uint64  `json:"request_id,omitempty"`
	AckMode        *string  `json:"ack_mode,omitempty"`
	Status         *string  `json:"status,omitempty"`
	Message        *string  `json:"message,omitempty"`
	SubscriptionID *uint64  `json:"subscription_id,omitempty"`
	BaseOffset     *uint64  `json:"base_offset,omitempty"`
	TenantID       *string  `json:"tenant_id,omitempty"`
	Namespace      *string  `json:"namespace,omitempty"`
	Stream         *string  `json:"stream,omitempty"`
	PayloadsUTF8   []string `json:"payloads_utf8,omitempty"`
	PayloadsHex    []string `json:"payloads_hex,omitempty"`

	Shard           *uint32 `json:"shard,omitempty"`
	KeyUTF8         *string `json:"key_utf8,omitempty"`
	KeyHex          *string `json:"key_hex,omitempty"`
	ProducerID      *uint64 `json:"producer_id,omitempty"`
	Sequence        *uint64 `json:"sequence,omitempty"`
	Code            *string `json:"code,omitempty"`
	Retry           *string `json:"retry,omitempty"`
	Reason          *string `json:"reason,omitempty"`
	RetryAfterMs    *uint64 `json:"retry_after_ms,omitempty"`
	OwnerNodeID     *string `json:"owner_node_id,omitempty"`
	OwnerAddr       *string `json:"owner_addr,omitempty"`
	OwnerGeneration *uint64 `json:"owner_generation,omitempty"`
	Offset          *uint64 `json:"offset,omitempty"`

	Publisher  *string       `json:"publisher,omitempty"`
	Timestamps []uint64      `json:"timestamps,omitempty"`
	Headers    [][][2]string `json:"headers,omitempty"`

	PayloadHex string `json:"payload_hex,omitempty"`
	FrameHex   string `json:"frame_hex,omitempty"`
	Error      string `json:"error,omitempty"`
	MaxFrame   uint32 `json:"max_frame,omitempty"`
	Note       string `json:"note,omitempty"`

	// Path is the file the vector came from; FileHex the content of the
	// NAME.hex file beside it ("" if there is none).
	Path    string `json:"-"`
	FileHex string `json:"-"`
}

// Load reads a vector file and its NAME.hex sibling, if any.
func Load(path string) (Vector, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Vector{}, err
	}
	var v Vector
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&v); err != nil {
		return Vector{}, fmt.Errorf("wirevector: %s: %w", path, err)
	}
	v.Path = path
	hexPath := strings.TrimSuffix(path, ".json") + ".hex"
	if hexPath != path {
		if b, err := os.ReadFile(hexPath); err == nil {
			v.FileHex = strings.TrimSpace(string(b))
		} else if !errors.Is(err, os.ErrNotExist) {
			return Vector{}, err
		}
	}
	return v, nil
}

// Check encodes the vector's message through the wire API and compares the
// bytes with frame_hex, then decodes frame_hex and compares the fields. For
// a negative vector it checks that decoding fails with the named error.
func Check(v Vector) error {
	frame, err := ParseHex(v.FrameHex)
	if err != nil {
		return fmt.Errorf("frame_hex: %w", err)
	}
	if v.FileHex != "" && !strings.EqualFold(v.FileHex, v.FrameHex) {
		return errors.New(".hex file differs from frame_hex")
	}
	if v.PayloadHex != "" {
		if err := checkPayloadHex(v.PayloadHex, frame); err != nil {
			return err
		}
	}
	if v.Error != "" {
		return checkNegative(v, frame)
	}
	enc, err := Encode(v)
	if err != nil {
		return fmt.Errorf("encode: %w", err)
	}
	if !bytes.Equal(enc, frame) {
		return fmt.Errorf("encode: got %x, want %x", enc, frame)
	}
	d, err := Decode(frame, v.MaxFrame)
	if err != nil {
		return fmt.Errorf("decode: %w", err)
	}
	return compareDecoded(v, d)
}

func checkPayloadHex(payloadHex string, frame []byte) error {
	payload, err := ParseHex(payloadHex)
	if err != nil {
		return fmt.Errorf("payload_hex: %w", err)
	}
	if len(frame) < wire.HeaderLen || !bytes.Equal(frame[wire.HeaderLen:], payload) {
		return errors.New("payload_hex is not the frame's payload")
	}
	return nil
}

func checkNegative(v Vector, frame []byte) error {
	want, ok := Sentinel(v.Error)
	if !ok {
		return fmt.Errorf("unknown error name %q", v.Error)
	}
	_, err := Decode(frame, v.MaxFrame)
	if err == nil {
		return fmt.Errorf("decoded without error, want %s", v.Error)
	}
	if !errors.Is(err, want) {
		return fmt.Errorf("got %v, want %s", err, v.Error)
	}
	return nil
}

// ParseHex decodes hex, ignoring whitespace.
func ParseHex(s string) ([]byte, error) {
	s = strings.Join(strings.Fields(s), "")
	return hex.DecodeString(s)
}

// compareDecoded compares what the frame decoded to with what the vector
// describes, both rendered as vector fields so a mismatch prints readably.
func compareDecoded(v Vector, d Decoded) error {
	if v.PayloadJSON != nil {
		if d.Kind != wire.KindJSON {
			return fmt.Errorf("decoded kind %s, want json", d.Kind)
		}
		want, err := wire.DecodeJSON([]byte(*v.PayloadJSON))
		if err != nil {
			return fmt.Errorf("payload_json: %w", err)
		}
		if !jsonEqual(want, d.JSON) {
			return fmt.Errorf("decoded %s, want %s", d.JSON.AppendJSON(nil), *v.PayloadJSON)
		}
		return nil
	}
	b, err := fromVector(v)
	if err != nil {
		return err
	}
	want, _ := json.Marshal(b.toVector())
	got, _ := json.Marshal(d.Fields)
	if !bytes.Equal(want, got) {
		return fmt.Errorf("decoded %s, want %s", got, want)
	}
	return nil
}

// jsonEqual compares two messages by their canonical encoding, which is
// exact for every field the protocol has.
func jsonEqual(a, b wire.Message) bool {
	return a.Type() == b.Type() && bytes.Equal(a.AppendJSON(nil), b.AppendJSON(nil))
}

// payloadsOf returns the vector's payloads from payloads_utf8 or
// payloads_hex.
func payloadsOf(v Vector) ([][]byte, error) {
	if v.PayloadsUTF8 != nil && v.PayloadsHex != nil {
		return nil, errors.New("both payloads_utf8 and payloads_hex")
	}
	out := make([][]byte, 0, len(v.PayloadsUTF8)+len(v.PayloadsHex))
	for _, s := range v.PayloadsUTF8 {
		out = append(out, []byte(s))
	}
	for i, s := range v.PayloadsHex {
		b, err := ParseHex(s)
		if err != nil {
			return nil, fmt.Errorf("payloads_hex[%d]: %w", i, err)
		}
		out = append(out, b)
	}
	return out, nil
}

// setPayloads renders payloads as UTF-8 strings when all are valid, else
// as hex.
func (v *Vector) setPayloads(payloads [][]byte) {
	v.PayloadsUTF8, v.PayloadsHex = nil, nil
	allUTF8 := true
	for _, p := range payloads {
		allUTF8 = allUTF8 && utf8.Valid(p)
	}
	for _, p := range payloads {
		if allUTF8 {
			v.PayloadsUTF8 = append(v.PayloadsUTF8, string(p))
		} else {
			v.PayloadsHex = append(v.PayloadsHex, hex.EncodeToString(p))
		}
	}
	if v.PayloadsUTF8 == nil && v.PayloadsHex == nil {
		v.PayloadsUTF8 = []string{}
	}
}

// Sentinel maps an error name ("ErrTruncated" or "wire.ErrTruncated") to the
// wire sentinel.
func Sentinel(name string) (error, bool) {
	err, ok := sentinels[strings.TrimPrefix(name, "wire.")]
	return err, ok
}

var sentinels = map[string]error{
	"ErrShortHeader":        wire.ErrShortHeader,
	"ErrBadMagic":           wire.ErrBadMagic,
	"ErrUnsupportedVersion": wire.ErrUnsupportedVersion,
	"ErrUnknownFlags":       wire.ErrUnknownFlags,
	"ErrInvalidFlags":       wire.ErrInvalidFlags,
	"ErrFrameTooLarge":      wire.ErrFrameTooLarge,
	"ErrTruncated":          wire.ErrTruncated,
	"ErrCountTooLarge":      wire.ErrCountTooLarge,
	"ErrTrailingBytes":      wire.ErrTrailingBytes,
	"ErrInvalidUTF8":        wire.ErrInvalidUTF8,
	"ErrBadAckMode":         wire.ErrBadAckMode,
	"ErrBadAckStatus":       wire.ErrBadAckStatus,
	"ErrUnknownMessageType": wire.ErrUnknownMessageType,
	"ErrMissingField":       wire.ErrMissingField,
	"ErrMalformedJSON":      wire.ErrMalformedJSON,
}

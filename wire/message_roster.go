package wire

// Roster messages (Felix-Go addition, capability CapRoster 0x0100). A roster
// is a named set of members per (tenant, namespace, roster); each member
// carries opaque metadata. See docs/protocol.md "Roster".

// RosterJoin adds Member to Roster (or replaces its metadata) on behalf of
// the sending connection: the member leaves by itself when that connection
// closes. Answered by roster_ok (request_id echoed) or error.
type RosterJoin struct {
	TenantID  string
	Namespace string
	Roster    string
	Member    string
	Metadata  []byte // b64, omitted when nil
	RequestID *uint64
}

// RosterLeave removes Member from Roster. Answered by roster_ok or error.
type RosterLeave struct {
	TenantID  string
	Namespace string
	Roster    string
	Member    string
	RequestID *uint64
}

// RosterWatch opens a watch: the broker answers subscribed{subscription_id}
// on the control stream and opens an event stream (event_stream_hello) that
// carries roster_snapshot frames up to one with Last, then roster_change
// frames, and subscription_gap if changes were dropped.
type RosterWatch struct {
	TenantID  string
	Namespace string
	Roster    string
}

// RosterOK answers a successful roster_join or roster_leave.
type RosterOK struct {
	RequestID *uint64
}

// RosterMember is one member of a snapshot.
type RosterMember struct {
	Member   string
	Metadata []byte // omitted when nil
}

// RosterSnapshot carries part of the roster's state at the moment the watch
// was registered. The snapshot may span several frames; Last marks the
// final one, after which only changes follow.
type RosterSnapshot struct {
	Members []RosterMember
	Last    bool
}

// RosterChangeKind is a roster_change's kind.
type RosterChangeKind string

const (
	RosterJoined RosterChangeKind = "join"
	RosterLeft   RosterChangeKind = "leave"
)

// RosterChange is one join (also a metadata update of a present member) or
// leave, in the order the broker applied them.
type RosterChange struct {
	Kind     RosterChangeKind
	Member   string
	Metadata []byte // joins only; omitted when nil
}

func (*RosterJoin) Type() MessageType     { return TypeRosterJoin }
func (*RosterLeave) Type() MessageType    { return TypeRosterLeave }
func (*RosterWatch) Type() MessageType    { return TypeRosterWatch }
func (*RosterOK) Type() MessageType       { return TypeRosterOK }
func (*RosterSnapshot) Type() MessageType { return TypeRosterSnapshot }
func (*RosterChange) Type() MessageType   { return TypeRosterChange }

func appendOptBytes(dst []byte, key string, b []byte) []byte {
	if b == nil {
		return dst
	}
	dst = append(dst, key...)
	return appendBase64(dst, b)
}

func appendBool(dst []byte, key string, v bool) []byte {
	dst = append(dst, key...)
	if v {
		return append(dst, "true"...)
	}
	return append(dst, "false"...)
}

func (m *RosterJoin) AppendJSON(dst []byte) []byte {
	dst = appendHead(dst, TypeRosterJoin)
	dst = appendTopic(dst, m.TenantID, m.Namespace, `,"roster":`, m.Roster)
	dst = appendStrField(dst, `,"member":`, m.Member)
	dst = appendOptBytes(dst, `,"metadata":`, m.Metadata)
	dst = appendOptUint(dst, `,"request_id":`, m.RequestID)
	return append(dst, '}')
}

func (m *RosterLeave) AppendJSON(dst []byte) []byte {
	dst = appendHead(dst, TypeRosterLeave)
	dst = appendTopic(dst, m.TenantID, m.Namespace, `,"roster":`, m.Roster)
	dst = appendStrField(dst, `,"member":`, m.Member)
	dst = appendOptUint(dst, `,"request_id":`, m.RequestID)
	return append(dst, '}')
}

func (m *RosterWatch) AppendJSON(dst []byte) []byte {
	dst = appendHead(dst, TypeRosterWatch)
	dst = appendTopic(dst, m.TenantID, m.Namespace, `,"roster":`, m.Roster)
	return append(dst, '}')
}

func (m *RosterOK) AppendJSON(dst []byte) []byte {
	dst = appendHead(dst, TypeRosterOK)
	dst = appendOptUint(dst, `,"request_id":`, m.RequestID)
	return append(dst, '}')
}

func (m *RosterSnapshot) AppendJSON(dst []byte) []byte {
	dst = appendHead(dst, TypeRosterSnapshot)
	dst = append(dst, `,"members":[`...)
	for i := range m.Members {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendStrField(dst, `{"member":`, m.Members[i].Member)
		dst = appendOptBytes(dst, `,"metadata":`, m.Members[i].Metadata)
		dst = append(dst, '}')
	}
	dst = append(dst, ']')
	dst = appendBool(dst, `,"last":`, m.Last)
	return append(dst, '}')
}

func (m *RosterChange) AppendJSON(dst []byte) []byte {
	dst = appendHead(dst, TypeRosterChange)
	dst = appendStrField(dst, `,"kind":`, string(m.Kind))
	dst = appendStrField(dst, `,"member":`, m.Member)
	dst = appendOptBytes(dst, `,"metadata":`, m.Metadata)
	return append(dst, '}')
}

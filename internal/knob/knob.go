package knob

import (
	"errors"
	"fmt"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ErrInvalid is the category of every validation failure returned by Load.
var ErrInvalid = errors.New("knob: invalid value")

// ValueError describes one knob whose value is not allowed.
type ValueError struct {
	Name    string // the knob, e.g. FELIX_QUIC_BIND
	Value   string // the value as found in the environment
	Reason  string // why it was refused
	Allowed string // what the knob accepts
}

func (e *ValueError) Error() string {
	return fmt.Sprintf("%s=%q: %s (allowed: %s)", e.Name, e.Value, e.Reason, e.Allowed)
}

// Is makes every ValueError match ErrInvalid.
func (e *ValueError) Is(target error) bool { return target == ErrInvalid }

// Knob is the declaration shared by every kind of knob.
type Knob struct {
	Name    string
	Default string
	Doc     string
	kind    string
	allowed string
	parse   func(string) (any, error)
	// emptyIsValue: set to "" means the empty value (an empty list), not
	// the default.
	emptyIsValue bool
}

// Allowed describes the accepted values, e.g. "integer in [1, 65536]".
func (k *Knob) Allowed() string { return k.allowed }

// Kind names the value type, e.g. "int", "bool", "duration".
func (k *Knob) Kind() string { return k.kind }

// Registry holds the declared knobs in declaration order.
type Registry struct {
	knobs  []*Knob
	byName map[string]*Knob
}

// New returns an empty registry.
func New() *Registry { return &Registry{byName: map[string]*Knob{}} }

// Knobs returns the declarations in declaration order.
func (r *Registry) Knobs() []*Knob { return slices.Clone(r.knobs) }

// Lookup returns the declaration of name, or nil.
func (r *Registry) Lookup(name string) *Knob { return r.byName[name] }

func (r *Registry) add(k *Knob) *Knob {
	if !strings.HasPrefix(k.Name, "FELIX_") {
		panic("knob: name without FELIX_ prefix: " + k.Name)
	}
	if _, dup := r.byName[k.Name]; dup {
		panic("knob: declared twice: " + k.Name)
	}
	if _, err := k.parse(k.Default); err != nil {
		panic(fmt.Sprintf("knob: default of %s is not allowed: %v", k.Name, err))
	}
	r.knobs = append(r.knobs, k)
	r.byName[k.Name] = k
	return k
}

// Values is the validated result of Load.
type Values struct {
	parsed map[string]any
	raw    map[string]string // only knobs set in the environment
}

// Raw returns the value as set in the environment and whether it was set.
func (v *Values) Raw(name string) (string, bool) {
	s, ok := v.raw[name]
	return s, ok
}

// Load reads every declared knob through lookup (os.LookupEnv in binaries, a map
// in tests). An empty value counts as unset, except for a List, where it is
// the empty list. All failures are joined; each is a *ValueError.
func (r *Registry) Load(lookup func(string) (string, bool)) (*Values, error) {
	v := &Values{parsed: map[string]any{}, raw: map[string]string{}}
	var errs []error
	for _, k := range r.knobs {
		s, ok := lookup(k.Name)
		if !ok || s == "" && !k.emptyIsValue {
			s = k.Default
		} else {
			v.raw[k.Name] = s
		}
		p, err := k.parse(s)
		if err != nil {
			errs = append(errs, &ValueError{Name: k.Name, Value: s, Reason: err.Error(), Allowed: k.allowed})
			continue
		}
		v.parsed[k.Name] = p
	}
	return v, errors.Join(errs...)
}

// Unknown returns the FELIX_* names in environ (KEY=VALUE strings) that no
// knob declares: almost always a typo that would otherwise be ignored.
func (r *Registry) Unknown(environ []string) []string {
	var out []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "FELIX_") && r.byName[name] == nil {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

func get[T any](v *Values, k *Knob) T {
	p, ok := v.parsed[k.Name]
	if !ok {
		panic("knob: " + k.Name + " read from Values that did not load it")
	}
	return p.(T)
}

// Int is an integer knob.
type Int struct{ *Knob }

// Get returns the validated value.
func (k Int) Get(v *Values) int64 { return get[int64](v, k.Knob) }

// Int declares an integer knob accepting [min, max].
func (r *Registry) Int(name string, def, min, max int64, doc string) Int {
	return Int{r.add(&Knob{
		Name: name, Default: strconv.FormatInt(def, 10), Doc: doc, kind: "int",
		allowed: fmt.Sprintf("integer in [%d, %d]", min, max),
		parse: func(s string) (any, error) {
			n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
			if err != nil {
				return nil, errors.New("not an integer")
			}
			if n < min || n > max {
				return nil, errors.New("out of range")
			}
			return n, nil
		},
	})}
}

// Bytes is a size knob; values accept the suffixes KiB, MiB, GiB (and K, M, G).
type Bytes struct{ *Knob }

// Get returns the validated value in bytes.
func (k Bytes) Get(v *Values) int64 { return get[int64](v, k.Knob) }

// Bytes declares a byte-size knob accepting [min, max].
func (r *Registry) Bytes(name string, def, min, max int64, doc string) Bytes {
	return Bytes{r.add(&Knob{
		Name: name, Default: FormatBytes(def), Doc: doc, kind: "bytes",
		allowed: fmt.Sprintf("size in [%s, %s] (suffix KiB, MiB, GiB)", FormatBytes(min), FormatBytes(max)),
		parse: func(s string) (any, error) {
			n, err := ParseBytes(s)
			if err != nil {
				return nil, err
			}
			if n < min || n > max {
				return nil, errors.New("out of range")
			}
			return n, nil
		},
	})}
}

var byteSuffixes = []struct {
	suffix string
	mult   int64
}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}, {"B", 1}}

// ParseBytes parses "4096", "64KiB", "16 MiB", "1G".
func ParseBytes(s string) (int64, error) {
	s = strings.TrimSpace(s)
	mult := int64(1)
	for _, x := range byteSuffixes {
		if strings.HasSuffix(s, x.suffix) {
			s, mult = strings.TrimSpace(strings.TrimSuffix(s, x.suffix)), x.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, errors.New("not a size")
	}
	if n > math.MaxInt64/mult {
		return 0, errors.New("out of range")
	}
	return n * mult, nil
}

// FormatBytes prints n with the largest exact binary suffix.
func FormatBytes(n int64) string {
	for _, x := range byteSuffixes[:3] {
		if n >= x.mult && n%x.mult == 0 {
			return strconv.FormatInt(n/x.mult, 10) + x.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}

// Bool is a boolean knob.
type Bool struct{ *Knob }

// Get returns the validated value.
func (k Bool) Get(v *Values) bool { return get[bool](v, k.Knob) }

// Bool declares a boolean knob (true/false, 1/0, yes/no, on/off).
func (r *Registry) Bool(name string, def bool, doc string) Bool {
	return Bool{r.add(&Knob{
		Name: name, Default: strconv.FormatBool(def), Doc: doc, kind: "bool",
		allowed: "true|false (also 1|0, yes|no, on|off)",
		parse: func(s string) (any, error) {
			switch strings.ToLower(strings.TrimSpace(s)) {
			case "1", "true", "yes", "on":
				return true, nil
			case "0", "false", "no", "off":
				return false, nil
			}
			return nil, errors.New("not a boolean")
		},
	})}
}

// Enum is a knob taking one word of a fixed set.
type Enum struct{ *Knob }

// Get returns the validated word.
func (k Enum) Get(v *Values) string { return get[string](v, k.Knob) }

// Enum declares a knob accepting exactly one of values.
func (r *Registry) Enum(name, def string, values []string, doc string) Enum {
	return Enum{r.add(&Knob{
		Name: name, Default: def, Doc: doc, kind: "enum",
		allowed: "one of " + strings.Join(values, "|"),
		parse: func(s string) (any, error) {
			s = strings.TrimSpace(s)
			if !slices.Contains(values, s) {
				return nil, errors.New("unknown word")
			}
			return s, nil
		},
	})}
}

// String is a free-form knob with an optional check.
type String struct{ *Knob }

// Get returns the validated value.
func (k String) Get(v *Values) string { return get[string](v, k.Knob) }

// String declares a string knob. check may be nil; allowed describes it.
func (r *Registry) String(name, def, allowed, doc string, check func(string) error) String {
	return String{r.add(&Knob{
		Name: name, Default: def, Doc: doc, kind: "string", allowed: allowed,
		parse: func(s string) (any, error) {
			if check != nil {
				if err := check(s); err != nil {
					return nil, err
				}
			}
			return s, nil
		},
	})}
}

// List declares a string knob holding a list, for which set but empty
// means the empty list rather than the default (FELIX_STREAMS= creates no
// stream, where the default creates the demo one).
func (r *Registry) List(name, def, allowed, doc string, check func(string) error) String {
	k := r.String(name, def, allowed, doc, check)
	k.emptyIsValue = true
	return k
}

// HostPort declares a knob holding a host:port listen address.
func (r *Registry) HostPort(name, def, doc string) String {
	return r.String(name, def, "host:port (port 0 picks a free port)", doc, CheckHostPort)
}

// CheckHostPort accepts "host:port" with a numeric port in [0, 65535].
func CheckHostPort(s string) error {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return errors.New("not host:port")
	}
	if strings.ContainsAny(host, " /") {
		return errors.New("bad host")
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p > 65535 {
		return errors.New("bad port")
	}
	return nil
}

// Duration is a knob holding a whole number of a fixed unit (the knob's name
// says the unit: _MS, _US, _S), which keeps values greppable and unambiguous.
type Duration struct {
	*Knob
	unit time.Duration
}

// Get returns the validated duration.
func (k Duration) Get(v *Values) time.Duration { return time.Duration(get[int64](v, k.Knob)) * k.unit }

// Duration declares a duration knob counted in unit, accepting [min, max] units.
func (r *Registry) Duration(name string, def, min, max int64, unit time.Duration, doc string) Duration {
	n := r.Int(name, def, min, max, doc)
	n.kind = "duration"
	n.allowed = fmt.Sprintf("integer %s in [%d, %d]", unitName(unit), min, max)
	return Duration{Knob: n.Knob, unit: unit}
}

func unitName(u time.Duration) string {
	switch u {
	case time.Microsecond:
		return "µs"
	case time.Millisecond:
		return "ms"
	case time.Second:
		return "s"
	}
	return u.String()
}

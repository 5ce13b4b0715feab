package endpoint

import (
	"errors"
	"fmt"

	"github.com/felixmq/felix/internal/devdir"
)

// The client-side environment variables.
const (
	AddrEnv         = "FELIX_ADDR"         // broker QUIC host:port
	AdminEnv        = "FELIX_ADMIN"        // broker admin HTTP host:port or URL
	ControlPlaneEnv = "FELIX_CONTROLPLANE" // control plane URL
	CAEnv           = "FELIX_CA"           // PEM file of certificates to trust
	TenantEnv       = "FELIX_TENANT"
	ContextEnv      = "FELIX_CONTEXT" // the context to use instead of the selected one
)

// Vars are every variable the tools read (FELIX_TOKEN included), which a
// server sharing their environment must not take for unknown knobs.
var Vars = []string{AddrEnv, AdminEnv, ControlPlaneEnv, CAEnv, TenantEnv, ContextEnv, devdir.TokenEnv}

// Defaults of `make run`'s broker and of a control plane on its own.
const (
	DefaultAddr         = "127.0.0.1:5000"
	DefaultAdmin        = "127.0.0.1:8080"
	DefaultControlPlane = "http://127.0.0.1:7070"
	DefaultTenant       = "t1"
)

// Value is one resolved setting and where it came from ("FELIX_ADDR",
// "context prod", "/tmp/felix-dev/broker.json", "default").
type Value struct {
	V, From string
}

func (v Value) String() string { return v.V }

// Endpoints are the defaults of every tool's connection flags.
type Endpoints struct {
	// Context is the context in effect ("" for none).
	Context      string
	Addr         Value
	Admin        Value
	ControlPlane Value
	CA           Value
	// TokenFile is read when neither --token nor FELIX_TOKEN gives the
	// token (devdir.Token).
	TokenFile Value
	Tenant    Value
}

// ErrNoContext: the context named by FELIX_CONTEXT or selected is not saved.
var ErrNoContext = errors.New("endpoint: no such context")

// Resolve works out the endpoints from lookup's environment, the context in
// effect and the dev directory.
func Resolve(lookup devdir.Lookup) (Endpoints, error) {
	var ep Endpoints
	st := StoreFor(lookup)
	name, from := "", ""
	if v, ok := lookup(ContextEnv); ok && v != "" {
		name, from = v, ContextEnv
	} else if name = st.Selected(); name != "" {
		from = "selected by felix context use"
	}
	var ctx Context
	if name != "" {
		var err error
		if ctx, err = st.Load(name); err != nil {
			return ep, fmt.Errorf("context %q (%s): %w", name, from, err)
		}
		ep.Context = name
	}
	inCtx := "context " + name
	broker, haveBroker := devdir.ReadBroker(lookup)
	brokerFile := devdir.Path(lookup, devdir.BrokerFile)
	pick := func(env, fromCtx, fromDev, devFrom, def string) Value {
		if v, ok := lookup(env); ok && v != "" {
			return Value{v, env}
		}
		if fromCtx != "" {
			return Value{fromCtx, inCtx}
		}
		if fromDev != "" {
			return Value{fromDev, devFrom}
		}
		return Value{def, "default"}
	}
	ep.Addr = pick(AddrEnv, ctx.Addr, when(haveBroker, broker.QUIC), brokerFile, DefaultAddr)
	ep.Admin = pick(AdminEnv, ctx.Admin, when(haveBroker, broker.Admin), brokerFile, DefaultAdmin)
	cpFile := devdir.Path(lookup, devdir.ControlPlaneURLFile)
	cp := devdir.ControlPlaneURL(lookup, "")
	if haveBroker && broker.ControlPlane != "" {
		cp, cpFile = broker.ControlPlane, brokerFile
	}
	ep.ControlPlane = pick(ControlPlaneEnv, ctx.ControlPlane, cp, cpFile, DefaultControlPlane)
	ep.CA = pick(CAEnv, ctx.CA, devdir.Path(lookup, devdir.CertFile), "the dev directory", "")
	ep.TokenFile = pick("", ctx.TokenFile, devdir.Path(lookup, devdir.TokenFile), "the dev directory", "")
	ep.Tenant = pick(TenantEnv, ctx.Tenant, "", "", DefaultTenant)
	return ep, nil
}

func when(ok bool, v string) string {
	if !ok {
		return ""
	}
	return v
}

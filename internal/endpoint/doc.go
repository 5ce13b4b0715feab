// Package endpoint decides where the Felix tools (felix, felix-loadgen,
// felixtrace) connect when their flags do not say, the same way for all:
// the environment (FELIX_ADDR, FELIX_ADMIN, FELIX_CONTROLPLANE, FELIX_CA,
// FELIX_TENANT, and FELIX_TOKEN for the token itself), then a named
// context (FELIX_CONTEXT, else the one `felix context use` selected),
// then what a local broker wrote into its dev directory (broker.json,
// cert.pem, token, controlplane.url: package devdir), then the built-in
// defaults of `make run`. Each Value says where it came from, so a tool
// can tell its user.
//
// Contexts are small JSON files in the user's configuration directory
// ($XDG_CONFIG_HOME/felix, else $HOME/.config/felix): contexts/NAME.json
// and the selected name in "context".
//
// It must not import anything of the project outside internal/. It reads
// the environment only through the lookup its callers pass (os.LookupEnv
// in binaries). Not safe for concurrent writes of one context; all
// platforms.
package endpoint

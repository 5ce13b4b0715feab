// Package devdir names the files a broker started by `make run` writes for
// the clients on the same machine, and reads them back for those clients.
//
// The directory is FELIX_DEV_DIR (default /tmp/felix-dev). A broker takes
// it (Take: one broker at a time, by a lock the kernel drops when the
// process ends) once its listeners are bound, and only then writes into
// it: cert.pem (its self-signed certificate), broker.json (where it
// listens) and, with its embedded control plane, token (a Felix token with
// full rights on tenant t1, mode 0600) and controlplane.url (where `felix
// admin` finds that control plane). A broker that fails to start, or finds
// the directory held by another, changes nothing in it. The felix CLI,
// felix-loadgen and felixtrace default to these files; their flags, the
// environment and a named context override (internal/endpoint).
//
// The broker creates the directory private (0700) and refuses one another
// user owns (Ensure); the clients read from it only when it is theirs and
// no one else may write into it (Check): in a directory another local user
// controls, that user could swap controlplane.url for a server of theirs
// and collect the token the CLI sends it.
//
// It must not import anything of the project but internal/linux: clients
// and the broker binary both use it. It reads the environment only through the lookup function its
// callers pass (os.LookupEnv in binaries), so tests stay apart.
package devdir

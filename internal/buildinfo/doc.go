// Package buildinfo owns the felix_build_info metric: the binary's
// version, VCS revision and Go version, read once from the build.
//
// It must not read the environment. Safe for concurrent use; all
// platforms.
package buildinfo

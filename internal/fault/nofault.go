//go:build !faults

// Package fault is the seam for the robustness scenarios' crash points. Without the build tag
// "faults" (every production build) At does nothing and costs a call.
package fault

// At marks that the process passes the named point; a no-op in production builds.
func At(string) {}

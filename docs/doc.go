// Package docs holds no code: its directory carries the documentation beside the README (the
// contract, a glossary of the Dutch terms, operations, design, performance, robustness) and the
// figures the benchmarks write. Its test checks that every relative link of the documentation
// leads to a file and heading that exist.
package docs

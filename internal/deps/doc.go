// Package deps holds the test that keeps pibot's package arrows (docs/architecture.md,
// "Layers and arrows") true. It has no code of its own.
package deps

// Package deps holds the test that keeps pibot's package arrows (DESIGN.md
// "Layout and dependency arrows") true. It has no code of its own.
package deps

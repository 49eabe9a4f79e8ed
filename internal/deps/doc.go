// Package deps holds the test that keeps pibot's package arrows
// (docs/architecture.md, "Layers and arrows") true. It has no code of its own.
//
// The rules are an allow-list, one rule per package of the module (rules_test.go):
//
//   - Direct imports. A rule lists the module packages and third-party modules
//     its package may import directly; an import not listed fails the test with
//     the rule's reason. The standard library is always allowed. Direct
//     imports are the rule for module packages because every package has its
//     own rule: what a package reaches transitively is then fixed by the rules
//     of the packages it imports, and a failure names the one edge to discuss.
//   - Transitive bans. A rule can also name modules and packages its package
//     must never reach, directly or through anything it imports (Deps). These
//     keep platform and model SDKs, Redis and the browser driver out of the
//     layers that must not know them, even through a third-party module.
//   - Tests. A package's _test.go files may import what the package may, the
//     package itself, the test support package of anything they may import
//     (chat/chattest for a package that may import chat), and what the rule
//     lists for tests.
//   - Test support. Packages marked test-only (the xxxtest packages, e2e,
//     bench, compat, tinyfs) are never imported by production packages, and
//     no command of pibot reaches them or the testing package.
//
// Rules are exact: a package without a rule fails the test, so a new package
// is added to the list deliberately. A rule that names a package which no
// longer exists (renamed or removed) fails the test too, as does an allowed
// third-party module that go.mod does not require.
package deps

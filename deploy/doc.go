// Package deploy holds no code: the directory keeps the service unit
// (systemd/), the container image's configuration (docker/) and the
// compose file, and this package's tests check them, the top-level
// Dockerfile and scripts/release for the properties the README promises
// (static stamped binaries, a non-root image with the agent's tools and a
// health check, a hardened unit reading secrets through LoadCredential).
package deploy

package rediscluster

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// MinSecretLen is the shortest cluster secret NewKeys accepts, in bytes.
const MinSecretLen = 32

// sealPrefix starts every sealed value: the format's version.
const sealPrefix = "p1."

// ErrForged is returned by Keys.Open for a value pibot did not seal with
// the cluster secret, or sealed for another place: written by someone
// else with access to Redis, or by a replica with another secret.
var ErrForged = errors.New("rediscluster: not sealed with the cluster secret")

// Keys seals what the replicas keep in Redis and read back as the basis of
// a right: inbox items (whose sender a run acts for), the pairing state,
// spend overrides, index bindings and the events of a Topic. A sealed value
// is AES-256-GCM ciphertext under a key derived from the cluster secret
// (HKDF-SHA256), bound to the Redis key (or channel) it is written to, so
// write access to Redis alone can neither read such a value nor mint one,
// nor move one to another key. It cannot tell a value from an older value
// pibot itself wrote at the same key (a replay).
//
// A nil *Keys seals nothing: values are stored as they are and read back
// unchecked (tests of the Redis mechanics; cmd/pibot always sets Keys).
type Keys struct {
	aead cipher.AEAD
}

// NewKeys derives the sealing key from secret (at least MinSecretLen
// bytes).
func NewKeys(secret []byte) (*Keys, error) {
	if len(secret) < MinSecretLen {
		return nil, fmt.Errorf("rediscluster: the cluster secret is %d bytes, want at least %d", len(secret), MinSecretLen)
	}
	key, err := hkdf.Key(sha256.New, secret, nil, "pibot cluster seal v1", 32)
	if err != nil {
		return nil, fmt.Errorf("rediscluster: derive key: %w", err)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("rediscluster: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("rediscluster: %w", err)
	}
	return &Keys{aead: aead}, nil
}

// Seal returns plain sealed for the Redis key (or channel) at: text that
// Open(at, …) alone turns back into plain.
func (k *Keys) Seal(at string, plain []byte) string {
	if k == nil {
		return string(plain)
	}
	ns := k.aead.NonceSize()
	buf := make([]byte, ns, ns+len(plain)+k.aead.Overhead())
	if _, err := rand.Read(buf); err != nil {
		panic("rediscluster: crypto/rand: " + err.Error()) // never fails on Linux
	}
	buf = k.aead.Seal(buf, buf, plain, []byte(at))
	return sealPrefix + base64.RawStdEncoding.EncodeToString(buf)
}

// Open returns the plain value sealed for at, or ErrForged.
func (k *Keys) Open(at, sealed string) ([]byte, error) {
	if k == nil {
		return []byte(sealed), nil
	}
	b64, ok := strings.CutPrefix(sealed, sealPrefix)
	if !ok {
		return nil, ErrForged
	}
	buf, err := base64.RawStdEncoding.DecodeString(b64)
	ns := k.aead.NonceSize()
	if err != nil || len(buf) < ns+k.aead.Overhead() {
		return nil, ErrForged
	}
	plain, err := k.aead.Open(nil, buf[:ns], buf[ns:], []byte(at))
	if err != nil {
		return nil, ErrForged
	}
	return plain, nil
}

// forged reports a value that failed Open through opts.OnForged.
func (o Options) forged(kind, at string) {
	if o.OnForged != nil {
		o.OnForged(kind, at)
	}
}

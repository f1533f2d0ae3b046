// Package secrets seals values for storage with envelope encryption: each
// value gets its own random 256-bit data key and is encrypted with
// AES-256-GCM under it; the data key is itself encrypted (wrapped) with a
// key-encryption key (KEK) from a Keyring, whose id is stored beside it so
// KEKs can rotate. Rewrap moves a sealed value to the current KEK without
// touching its ciphertext.
//
// Each service seals with keys of its own (Keyring.For): derived from the
// root KEKs with HKDF-SHA256 and the service's name, or given as they are
// on lines "<id>@<service>", so that one service's keyring does not open
// another's values.
//
// It must not read or write anything but its arguments, and must never put
// a plaintext or a key in an error message.
package secrets

import (
	"bufio"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// KeySize is the size of every key in bytes (AES-256).
const KeySize = 32

// Sealed is a value encrypted under its own data key, with the data key
// wrapped by the key-encryption key KeyID.
type Sealed struct {
	KeyID      string `bson:"key_id"`
	WrappedKey []byte `bson:"wrapped_key"` // nonce || AES-GCM(KEK, data key)
	Nonce      []byte `bson:"nonce"`
	Ciphertext []byte `bson:"ciphertext"`
}

// ErrUnknownKey means a value was sealed under a key-encryption key the
// keyring does not hold.
var ErrUnknownKey = errors.New("sealed under a key-encryption key this keyring does not hold")

// Keyring holds the key-encryption keys: the current one seals, every one
// opens.
type Keyring struct {
	current string
	keys    map[string]cipher.AEAD
	raw     map[string][]byte // the keys themselves, for For and Lines
	order   []string          // ids in the keyring's order, the current first
	// service is "" for a keyring as read; For sets it, and then order
	// lists only the service's keys (the root keys only open).
	service string
}

var (
	keyID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$`)
	// serviceKeyID is "<id>@<service>", a key given for one service.
	serviceKeyID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,62}@[A-Za-z0-9][A-Za-z0-9_-]{0,62}$`)
)

// serviceKeyInfo is HKDF's info for a service's key: the label that makes
// one service's key unrelated to another's.
const serviceKeyInfo = "dcm service key v1 "

// ParseKeyring reads a keyring: one key per line as "<id>:<base64 of 32
// bytes>" (a root key) or "<id>@<service>:<base64 of 32 bytes>" (a key of
// one service, see For); the first line is the current key. Blank lines
// and lines starting with '#' are skipped.
func ParseKeyring(text string) (*Keyring, error) {
	k := &Keyring{keys: map[string]cipher.AEAD{}, raw: map[string][]byte{}}
	sc := bufio.NewScanner(strings.NewReader(text))
	line := 0
	for sc.Scan() {
		line++
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		id, b64, ok := strings.Cut(l, ":")
		if !ok || !keyID.MatchString(id) && !serviceKeyID.MatchString(id) {
			return nil, fmt.Errorf("keyring line %d: want <id>:<base64 key> or <id>@<service>:<base64 key>, id and service of letters, digits, '-' or '_'", line)
		}
		raw, err := base64.StdEncoding.DecodeString(b64)
		if err != nil || len(raw) != KeySize {
			return nil, fmt.Errorf("keyring line %d: key %q is not the base64 of %d bytes", line, id, KeySize)
		}
		if _, dup := k.keys[id]; dup {
			return nil, fmt.Errorf("keyring line %d: key %q appears twice", line, id)
		}
		if err := k.add(id, raw, true); err != nil {
			return nil, err
		}
	}
	if k.current == "" {
		return nil, errors.New("keyring has no key")
	}
	return k, nil
}

// add puts key id in k; a sealing key is also a candidate for current,
// the first one added being current.
func (k *Keyring) add(id string, raw []byte, seals bool) error {
	aead, err := newAEAD(raw)
	if err != nil {
		return err
	}
	k.keys[id], k.raw[id] = aead, raw
	if seals {
		k.order = append(k.order, id)
		if k.current == "" {
			k.current = id
		}
	}
	return nil
}

// For returns the keyring of one service: for each root key "<id>", the
// key derived from it for service (HKDF-SHA256, info "dcm service key v1
// <service>"), named "<id>@<service>", and each line "<id>@<service>" as
// given (a line wins over the same key derived); the first of these in the
// keyring's order is current. The root keys stay in it to open values
// sealed before services had keys of their own, which Rewrap moves to the
// service's current key; they never seal. Keys of other services are left
// out. It fails when the keyring holds no key usable by service.
func (k *Keyring) For(service string) (*Keyring, error) {
	if !keyID.MatchString(service) {
		return nil, fmt.Errorf("service name %q: want letters, digits, '-' or '_'", service)
	}
	if k.service == service {
		return k, nil
	}
	if k.service != "" {
		return nil, fmt.Errorf("the keyring of service %q holds no keys of service %q", k.service, service)
	}
	out := &Keyring{keys: map[string]cipher.AEAD{}, raw: map[string][]byte{}, service: service}
	for _, id := range k.order {
		_, svc, given := strings.Cut(id, "@")
		switch {
		case given && svc == service:
			if err := out.add(id, k.raw[id], true); err != nil {
				return nil, err
			}
		case !given:
			if _, ok := k.keys[id+"@"+service]; !ok {
				derived, err := hkdf.Key(sha256.New, k.raw[id], nil, serviceKeyInfo+service, KeySize)
				if err != nil {
					return nil, fmt.Errorf("derive key %q for %s: %w", id, service, err)
				}
				if err := out.add(id+"@"+service, derived, true); err != nil {
					return nil, err
				}
			}
			if err := out.add(id, k.raw[id], false); err != nil {
				return nil, err
			}
		}
	}
	if out.current == "" {
		return nil, fmt.Errorf("no key for service %s: the keyring needs a root key (<id>:<key>) or a key of the service (<id>@%s:<key>)", service, service)
	}
	return out, nil
}

// Lines renders the keys that seal, in order, as keyring lines: for a
// keyring from For, the service's own keys, which are all a program
// serving only that service needs once every value is under them.
func (k *Keyring) Lines() string {
	var b strings.Builder
	for _, id := range k.order {
		b.WriteString(id + ":" + base64.StdEncoding.EncodeToString(k.raw[id]) + "\n")
	}
	return b.String()
}

// RootID is the root key a key id comes from: id without "@<service>".
func RootID(id string) string {
	root, _, _ := strings.Cut(id, "@")
	return root
}

// NewKeyLine returns a keyring line with a fresh random key named id.
func NewKeyLine(id string) string {
	return id + ":" + base64.StdEncoding.EncodeToString(random(KeySize)) + "\n"
}

// Current is the id of the key that seals.
func (k *Keyring) Current() string { return k.current }

// Seal encrypts plaintext under a fresh data key. aad binds the value to
// where it is stored (e.g. its record and field): Open must be given the same.
func (k *Keyring) Seal(plaintext, aad []byte) (Sealed, error) {
	dek := random(KeySize)
	aead, err := newAEAD(dek)
	if err != nil {
		return Sealed{}, err
	}
	nonce := random(aead.NonceSize())
	wrapped, err := k.wrap(k.current, dek)
	if err != nil {
		return Sealed{}, err
	}
	return Sealed{KeyID: k.current, WrappedKey: wrapped, Nonce: nonce, Ciphertext: aead.Seal(nil, nonce, plaintext, aad)}, nil
}

// Open decrypts s, which must have been sealed with the same aad.
func (k *Keyring) Open(s Sealed, aad []byte) ([]byte, error) {
	dek, err := k.unwrap(s)
	if err != nil {
		return nil, err
	}
	aead, err := newAEAD(dek)
	if err != nil {
		return nil, err
	}
	if len(s.Nonce) != aead.NonceSize() {
		return nil, errors.New("sealed value: bad nonce")
	}
	out, err := aead.Open(nil, s.Nonce, s.Ciphertext, aad)
	if err != nil {
		return nil, errors.New("sealed value: authentication failed")
	}
	return out, nil
}

// Rewrap returns s with its data key wrapped by the current key, and
// whether anything changed. The ciphertext is unchanged.
func (k *Keyring) Rewrap(s Sealed) (Sealed, bool, error) {
	if s.KeyID == k.current {
		return s, false, nil
	}
	dek, err := k.unwrap(s)
	if err != nil {
		return s, false, err
	}
	wrapped, err := k.wrap(k.current, dek)
	if err != nil {
		return s, false, err
	}
	s.KeyID, s.WrappedKey = k.current, wrapped
	return s, true, nil
}

// The key id is the additional data of the wrap, so a wrapped key cannot be
// relabelled as another key's.
func (k *Keyring) wrap(id string, dek []byte) ([]byte, error) {
	kek := k.keys[id]
	nonce := random(kek.NonceSize())
	return kek.Seal(nonce, nonce, dek, []byte(id)), nil
}

func (k *Keyring) unwrap(s Sealed) ([]byte, error) {
	kek, ok := k.keys[s.KeyID]
	if !ok {
		return nil, fmt.Errorf("key %q: %w", s.KeyID, ErrUnknownKey)
	}
	n := kek.NonceSize()
	if len(s.WrappedKey) < n {
		return nil, errors.New("sealed value: bad wrapped key")
	}
	dek, err := kek.Open(nil, s.WrappedKey[:n], s.WrappedKey[n:], []byte(s.KeyID))
	if err != nil {
		return nil, fmt.Errorf("sealed value: key %q does not unwrap its data key", s.KeyID)
	}
	return dek, nil
}

func newAEAD(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("aes: %w", err)
	}
	return cipher.NewGCM(block)
}

func random(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return b
}

package app

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/dcm-project/dcm/platform/server"
	"github.com/dcm-project/dcm/platform/store"
)

// mongoURI is DCM_MONGO_URI, or the contents of DCM_MONGO_URI_FILE
// trimmed; "" for the embedded store. Its errors never hold the URI.
func mongoURI(cfg *server.Config) (string, error) {
	switch {
	case cfg.MongoURI != "" && cfg.MongoURIFile != "":
		return "", errors.New("set DCM_MONGO_URI or DCM_MONGO_URI_FILE, not both")
	case cfg.MongoURIFile == "":
		return cfg.MongoURI, nil
	}
	b, err := os.ReadFile(cfg.MongoURIFile)
	if err != nil {
		return "", fmt.Errorf("DCM_MONGO_URI_FILE: %w", err)
	}
	uri := strings.TrimSpace(string(b))
	if uri == "" {
		return "", fmt.Errorf("DCM_MONGO_URI_FILE %s is empty", cfg.MongoURIFile)
	}
	return uri, nil
}

// keyringSetting names where loadKeyring read the keyring, for errors.
func keyringSetting(cfg *server.Config) string {
	switch {
	case cfg.KEK != "":
		return "DCM_KEK"
	case cfg.KEKFile != "":
		return "DCM_KEK_FILE " + cfg.KEKFile
	}
	return filepath.Join(cfg.DataDir, "kek") + " (DCM_KEK_FILE unset)"
}

// StoreFor is service's view of the program's store (store.Store.For):
// what the service seals, only its own keys open. It fails, naming the
// keyring's setting, when the keyring has no key for service.
func (e *Env) StoreFor(service string) (*store.Store, error) {
	if e.Store == nil {
		return nil, fmt.Errorf("%s: the program has no store", service)
	}
	v, err := e.Store.For(service)
	if err != nil {
		return nil, fmt.Errorf("%s: keyring %s: %w", service, keyringSetting(&e.Config), err)
	}
	return v, nil
}

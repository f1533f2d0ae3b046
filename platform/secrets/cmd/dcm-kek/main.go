// Command dcm-kek makes key-encryption keys for secrets at rest and gives
// each service the keys of its own (docs/security.md, "Rotating the
// key-encryption key"):
//
//	dcm-kek new [-id k2]                          a fresh root key line, to put first in the keyring
//	dcm-kek derive -service rsync [-f keyring]   the service's derived key lines (keyring from -f, or stdin)
//
// It prints keys to stdout and nothing else anywhere.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/dcm-project/dcm/platform/secrets"
)

func main() {
	if err := run(os.Args[1:], os.Stdin, os.Stdout); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "dcm-kek:", err)
		}
		os.Exit(2)
	}
}

const usage = "usage: dcm-kek new [-id <id>] | dcm-kek derive -service <name> [-f <keyring file>]"

func run(args []string, stdin io.Reader, stdout io.Writer) error {
	if len(args) == 0 {
		return errors.New(usage)
	}
	fs := flag.NewFlagSet("dcm-kek "+args[0], flag.ContinueOnError)
	switch args[0] {
	case "new":
		id := fs.String("id", time.Now().UTC().Format("k20060102-150405"), "id of the new key")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if _, err := secrets.ParseKeyring(secrets.NewKeyLine(*id)); err != nil {
			return fmt.Errorf("-id %q: %w", *id, err)
		}
		_, err := io.WriteString(stdout, secrets.NewKeyLine(*id))
		return err
	case "derive":
		service := fs.String("service", "", "the service (program name: core, rsync, cadist, ...) to derive keys for")
		file := fs.String("f", "-", "root keyring file (- : stdin)")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if *service == "" {
			return errors.New("derive: -service is required")
		}
		text, err := readKeyring(*file, stdin)
		if err != nil {
			return err
		}
		root, err := secrets.ParseKeyring(text)
		if err != nil {
			return err
		}
		k, err := root.For(*service)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(stdout, "# keys of service %s, the first one current\n%s", *service, k.Lines())
		return err
	}
	return errors.New(usage)
}

func readKeyring(file string, stdin io.Reader) (string, error) {
	var b []byte
	var err error
	if file == "-" {
		b, err = io.ReadAll(stdin)
	} else {
		b, err = os.ReadFile(file)
	}
	if err != nil {
		return "", fmt.Errorf("read keyring: %w", err)
	}
	return string(b), nil
}

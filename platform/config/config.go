// Package config loads a service's configuration from defaults, DCM_*
// environment variables and command-line flags (flags win), into one struct.
// Fields tagged secret:"true" never appear in a dump and are never flags
// (a command line shows in the process list). A field tagged
// programs:"a,b" is read by the programs named a and b only: to any other
// it does not exist, its variable ignored like any unknown one and its
// flag refused like any unknown flag. It must not read files or
// know about any particular service.
package config

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// Redacted replaces every non-empty secret value in a dump.
const Redacted = "[redacted]"

// Load fills cfg, a pointer to a struct, from its `default` tags, then from
// the environment (`env` tag), then from args (`flag` tag, with `usage`).
// Supported field kinds: string, bool, int, time.Duration. A field tagged
// both secret:"true" and with a flag is refused: a secret comes from the
// environment (or a file the program reads) only.
func Load(cfg any, name string, args []string) error {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	v := reflect.ValueOf(cfg).Elem()
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		fv := v.Field(i)
		if f.Tag.Get("secret") == "true" && f.Tag.Get("flag") != "" {
			return fmt.Errorf("config %s: a secret setting cannot be a flag (the process list shows flags); drop its flag tag and set %s instead", f.Name, f.Tag.Get("env"))
		}
		if !Reads(f, name) {
			continue
		}
		raw, hasDefault := f.Tag.Lookup("default")
		if env := f.Tag.Get("env"); env != "" {
			if val, ok := os.LookupEnv(env); ok {
				raw, hasDefault = val, true
			}
		}
		if hasDefault {
			if err := set(fv, raw); err != nil {
				return fmt.Errorf("config %s: %w", f.Name, err)
			}
		}
		if fl := f.Tag.Get("flag"); fl != "" {
			fs.Func(fl, f.Tag.Get("usage")+" ("+defaultOf(f)+"env "+f.Tag.Get("env")+")", func(s string) error { return set(fv, s) })
		}
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		// A word the program does not take would otherwise be ignored and
		// the program started: "dcm version" must not serve.
		return fmt.Errorf("unexpected argument %q: %s takes flags only (-h lists them)", fs.Arg(0), name)
	}
	return nil
}

// Reads reports whether program name reads setting f: every program,
// unless f's `programs` tag lists those that do (comma-separated). An
// empty name reads every setting.
func Reads(f reflect.StructField, name string) bool {
	only, ok := f.Tag.Lookup("programs")
	if !ok || name == "" {
		return true
	}
	for p := range strings.SplitSeq(only, ",") {
		if strings.TrimSpace(p) == name {
			return true
		}
	}
	return false
}

// defaultOf is a field's default for its usage line ("default 8s; "),
// or nothing when it has none.
func defaultOf(f reflect.StructField) string {
	if d := f.Tag.Get("default"); d != "" {
		return "default " + d + "; "
	}
	return ""
}

func set(fv reflect.Value, raw string) error {
	switch {
	case fv.Type() == reflect.TypeFor[time.Duration]():
		d, err := time.ParseDuration(raw)
		if err != nil {
			return err
		}
		fv.SetInt(int64(d))
	case fv.Kind() == reflect.String:
		fv.SetString(raw)
	case fv.Kind() == reflect.Bool:
		b, err := strconv.ParseBool(raw)
		if err != nil {
			return err
		}
		fv.SetBool(b)
	case fv.Kind() == reflect.Int:
		n, err := strconv.Atoi(raw)
		if err != nil {
			return err
		}
		fv.SetInt(int64(n))
	default:
		return fmt.Errorf("unsupported kind %s", fv.Kind())
	}
	return nil
}

// Dump renders cfg as JSON keyed by environment variable, with secret
// fields redacted: safe to log.
func Dump(cfg any) string { return DumpFor(cfg, "") }

// DumpFor is Dump of the settings program name reads (Reads).
func DumpFor(cfg any, name string) string {
	v := reflect.ValueOf(cfg)
	if v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	t := v.Type()
	out := map[string]any{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !Reads(f, name) {
			continue
		}
		key := f.Tag.Get("env")
		if key == "" {
			key = strings.ToLower(f.Name)
		}
		val := v.Field(i).Interface()
		if f.Tag.Get("secret") == "true" && !v.Field(i).IsZero() {
			val = Redacted
		}
		if d, ok := val.(time.Duration); ok {
			val = d.String()
		}
		out[key] = val
	}
	b, _ := json.Marshal(out)
	return string(b)
}

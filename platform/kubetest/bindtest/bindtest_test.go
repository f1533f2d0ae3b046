package bindtest

import (
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestUpdates proves the server is what external-dns's rfc2136 provider
// needs: an update signed with the key lands and dig reads it back, an
// unsigned one is refused.
func TestUpdates(t *testing.T) {
	s := Start(t)
	if got := s.Lookup(t, "ns."+s.Zone, "A"); !slices.Equal(got, []string{"127.0.0.1"}) {
		t.Fatalf("ns A = %v", got)
	}
	update := func(signed bool, name, addr string) error {
		args := []string{}
		if signed {
			args = append(args, "-y", "hmac-sha256:"+s.KeyName+":"+s.Secret)
		}
		cmd := exec.Command("nsupdate", args...)
		cmd.Stdin = strings.NewReader(fmt.Sprintf("server %s %d\nzone %s\nupdate add %s 60 A %s\nsend\n", s.Addr, s.Port, s.Zone, name, addr))
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("%w: %s", err, out)
		}
		return nil
	}
	if _, err := exec.LookPath("nsupdate"); err != nil {
		t.Skip("nsupdate (bind9-dnsutils) not installed")
	}
	if err := update(false, "unsigned."+s.Zone, "192.0.2.1"); err == nil {
		t.Fatal("an unsigned update was accepted")
	}
	if got := s.Lookup(t, "unsigned."+s.Zone, "A"); len(got) != 0 {
		t.Fatalf("unsigned update landed: %v", got)
	}
	if err := update(true, "signed."+s.Zone, "192.0.2.2"); err != nil {
		t.Fatalf("signed update: %v", err)
	}
	if got := s.Lookup(t, "signed."+s.Zone, "A"); !slices.Equal(got, []string{"192.0.2.2"}) {
		t.Fatalf("signed A = %v", got)
	}
}

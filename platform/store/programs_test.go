package store_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/store"
	"github.com/dcm-project/dcm/platform/store/storetest"
)

// The race between programs: this test binary, run again with
// helperEnv set, is one program with its own store connection. It
// connects, says "ready", waits for a line on its stdin, makes one call
// and prints what came of it: "won", "lost" or "error: ...".
const helperEnv = "DCM_STORE_RACE_HELPER"

func TestMain(m *testing.M) {
	if op := os.Getenv(helperEnv); op != "" {
		os.Exit(raceHelper(op))
	}
	os.Exit(m.Run())
}

func raceHelper(op string) int {
	uri, err := os.ReadFile(os.Getenv("DCM_STORE_RACE_URI_FILE"))
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	s, err := store.Open(store.Config{URI: strings.TrimSpace(string(uri)), Database: os.Getenv("DCM_STORE_RACE_DB")}, zap.NewNop())
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	defer s.Close(ctx)
	id, me := os.Getenv("DCM_STORE_RACE_ID"), os.Getenv("DCM_STORE_RACE_ME")
	recs := store.NewRecords(s, "race", "race", func() *structpb.Struct { return &structpb.Struct{} })
	leases := store.NewLeases(s, "leases")
	// Connected before the start: the race is between the calls, not the
	// handshakes.
	if _, err := recs.Get(ctx, id); err != nil && errs.Code(err) != codes.NotFound {
		fmt.Println("error:", err)
		return 1
	}
	fmt.Println("ready")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		fmt.Println("error:", err)
		return 1
	}
	switch op {
	case "update":
		body, _ := structpb.NewStruct(map[string]any{"w": me})
		err = recs.Update(ctx, id, 1, body)
	case "lease":
		_, err = leases.Acquire(ctx, id, me, time.Minute)
	}
	var held *store.HeldError
	switch {
	case err == nil:
		fmt.Println("won")
	case errs.Code(err) == codes.Aborted, errors.As(err, &held):
		fmt.Println("lost")
	default:
		fmt.Println("error:", err)
	}
	return 0
}

// raceAcrossPrograms starts n programs (raceHelper) on s for op on id,
// lets them go at once and returns what each printed.
func raceAcrossPrograms(t *testing.T, s *store.Store, op, id string, n int) []string {
	t.Helper()
	uriFile := filepath.Join(t.TempDir(), "uri")
	require.NoError(t, os.WriteFile(uriFile, []byte(s.ClientURI()), 0o600))
	type prog struct {
		cmd   *exec.Cmd
		in    io.WriteCloser
		lines *bufio.Scanner
	}
	progs := make([]prog, n)
	for i := range progs {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), helperEnv+"="+op, "DCM_STORE_RACE_URI_FILE="+uriFile,
			"DCM_STORE_RACE_DB="+s.Database().Name(), "DCM_STORE_RACE_ID="+id, fmt.Sprintf("DCM_STORE_RACE_ME=p%d", i))
		in, err := cmd.StdinPipe()
		require.NoError(t, err)
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		cmd.Stderr = os.Stderr
		require.NoError(t, cmd.Start())
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		progs[i] = prog{cmd: cmd, in: in, lines: bufio.NewScanner(out)}
	}
	for i, p := range progs {
		require.True(t, p.lines.Scan(), "program %d ended before it was ready", i)
		require.Equal(t, "ready", p.lines.Text(), "program %d", i)
	}
	for _, p := range progs {
		_, err := io.WriteString(p.in, "go\n")
		require.NoError(t, err)
	}
	out := make([]string, n)
	for i, p := range progs {
		require.True(t, p.lines.Scan(), "program %d printed no outcome", i)
		out[i] = p.lines.Text()
		require.NoError(t, p.cmd.Wait())
	}
	return out
}

func count(outcomes []string, want string) int {
	n := 0
	for _, o := range outcomes {
		if o == want {
			n++
		}
	}
	return n
}

// TestConditionalUpdateRaceAcrossPrograms has 8 separate programs, each
// with its own connection to the store (no serializer of this process
// between them on a store server), update one record from the same
// version at once: exactly one wins, the others are told Aborted, and
// the record holds the winner's body at the next version.
func TestConditionalUpdateRaceAcrossPrograms(t *testing.T) {
	if testing.Short() {
		t.Skip("starts programs: not in -short")
	}
	ctx := context.Background()
	s := storetest.Open(t)
	recs := store.NewRecords(s, "race", "race", func() *structpb.Struct { return &structpb.Struct{} })
	const programs = 8
	for round := range 3 {
		id := fmt.Sprintf("r%d", round)
		require.NoError(t, recs.Create(ctx, id, "", newStruct(t, map[string]any{"w": "none"})))
		out := raceAcrossPrograms(t, s, "update", id, programs)
		require.Equal(t, 1, count(out, "won"), "round %d: exactly one winner: %v", round, out)
		require.Equal(t, programs-1, count(out, "lost"), "round %d: %v", round, out)
		got, err := recs.Get(ctx, id)
		require.NoError(t, err)
		require.EqualValues(t, 2, got.Version)
		require.Equal(t, fmt.Sprintf("p%d", indexOf(out, "won")), got.Msg.AsMap()["w"], "the winner's body is stored")
	}
}

// TestLeaseRaceAcrossPrograms has 8 separate programs acquire one free
// lease at once: exactly one holds it, and it is the one stored.
func TestLeaseRaceAcrossPrograms(t *testing.T) {
	if testing.Short() {
		t.Skip("starts programs: not in -short")
	}
	ctx := context.Background()
	s := storetest.Open(t)
	leases := store.NewLeases(s, "leases")
	const programs = 8
	for round := range 3 {
		name := fmt.Sprintf("lock-%d", round)
		out := raceAcrossPrograms(t, s, "lease", name, programs)
		require.Equal(t, 1, count(out, "won"), "round %d: one holder: %v", round, out)
		require.Equal(t, programs-1, count(out, "lost"), "round %d: %v", round, out)
		list, err := leases.List(ctx)
		require.NoError(t, err)
		var holder string
		for _, l := range list {
			if l.Name == name {
				holder = l.Holder
			}
		}
		require.Equal(t, fmt.Sprintf("p%d", indexOf(out, "won")), holder)
	}
}

func indexOf(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return -1
}

// Command dcm-images builds the images of docs/images.md into bin/images
// (`make images`), or one image of a given static binary (for the test in
// deploy/test).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/dcm-project/dcm/test/images"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "dcm-images:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("dcm-images", flag.ContinueOnError)
	root := fs.String("root", "", "the repository (the directory holding go.work; make images passes it)")
	out := fs.String("out", "", "where the tarballs go (default ROOT/bin/images)")
	binary := fs.String("binary", "", "make one image of this static binary instead of building every image")
	ref := fs.String("ref", "", "with -binary: the image's name, e.g. dcm.local/hello:test")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *binary != "" {
		if *ref == "" || *out == "" {
			return fmt.Errorf("-binary wants -ref and -out (a file)")
		}
		return images.One(*binary, *ref, *out)
	}
	if *root == "" {
		return fmt.Errorf("-root is required: the directory holding go.work")
	}
	return images.BuildAll(ctx, *root, *out, os.Stdout)
}

// Command images writes Strait's container images as tarballs (see
// internal/images): `make images` runs it after building the static
// binaries.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/straitmesh/strait/internal/images"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "images:", err)
		os.Exit(1)
	}
}

func run() error {
	binDir := flag.String("bin-dir", "bin/static", "directory of the static (CGO_ENABLED=0) binaries straitd, strait-agent, strait-proxy, strait-echo")
	outDir := flag.String("out-dir", "bin/images", "directory for NAME.tar")
	hub := flag.String("hub", "strait", "image hub (Istio's global.hub)")
	tag := flag.String("tag", "latest", "image tag (Istio's global.tag)")
	flag.Parse()

	ctx := context.Background()
	host, err := images.HostFiles(ctx, images.HostOptions{Programs: images.HostPrograms, ExtraDirs: []string{images.XtablesDir}})
	if err != nil {
		return err
	}
	scratch, err := os.MkdirTemp("", "strait-images-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(scratch)
	specs, err := images.Specs(images.Options{BinDir: *binDir, Host: host}, scratch)
	if err != nil {
		return err
	}
	paths, err := images.WriteAll(ctx, specs, images.WriteOptions{Hub: *hub, Tag: *tag, OutDir: *outDir})
	if err != nil {
		return err
	}
	for i, p := range paths {
		fmt.Printf("%s/%s:%s\t%s\n", *hub, specs[i].Name, *tag, p)
	}
	return nil
}

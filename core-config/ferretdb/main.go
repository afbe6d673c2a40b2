// cellab-ferretdb: FerretDB v1 (a MongoDB-wire server) on SQLite, for labs without MongoDB.
//
// Built on FerretDB's embeddable package: the upstream command refuses to start when installed from the
// module proxy (its version file is generated at release time), and the embedded server has telemetry off
// and no debug listener by construction.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/FerretDB/FerretDB/ferretdb"
)

func main() {
	listenAddr := flag.String("listen-addr", "127.0.0.1:27017", "TCP address of the MongoDB wire protocol")
	dataDir := flag.String("data-dir", "", "folder of the SQLite databases (required)")
	logLevel := flag.String("log-level", "info", "debug, info, warn or error")
	flag.Parse()

	if *dataDir == "" {
		fmt.Fprintln(os.Stderr, "cellab-ferretdb: --data-dir is required")
		os.Exit(2)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintf(os.Stderr, "cellab-ferretdb: --log-level: %v\n", err)
		os.Exit(2)
	}
	abs, err := filepath.Abs(*dataDir)
	if err == nil {
		err = os.MkdirAll(abs, 0o700)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "cellab-ferretdb: --data-dir %s: %v\n", *dataDir, err)
		os.Exit(2)
	}

	logger := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	server, err := ferretdb.New(&ferretdb.Config{
		Listener:  ferretdb.ListenerConfig{TCP: *listenAddr},
		Logger:    logger,
		Handler:   "sqlite",
		SQLiteURL: "file:" + abs + "/",
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "cellab-ferretdb: %v\n", err)
		os.Exit(1)
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	logger.Info("listening", "uri", server.MongoDBURI(), "data_dir", abs)
	if err := server.Run(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "cellab-ferretdb: %v\n", err)
		os.Exit(1)
	}
}

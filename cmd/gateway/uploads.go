package main

import (
	"context"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/tether-dev/tether/internal/config"
	"github.com/tether-dev/tether/internal/uploads"
)

// uploadBlobs is where the bytes of uploads live (docs/deploy.md, "Uploads
// storage"): a bucket of an S3-compatible store when TETHER_UPLOAD_S3_BUCKET
// is set, shared by every gateway, else a directory of this gateway.
//
// A bucket that cannot be reached at start is logged, and the gateway
// serves anyway, like an identity provider that is down: uploads answer
// unavailable until the store answers, and everything else works.
func uploadBlobs(ctx context.Context, c *config.Config, log *slog.Logger) (uploads.Blobs, error) {
	if c.UploadS3Bucket == "" {
		dir := c.UploadDir
		if dir == "" {
			dir = filepath.Join(c.DataDir, "uploads")
		}
		return uploads.NewDir(dir)
	}
	pathStyle := c.UploadS3PathStyle == "true" || (c.UploadS3PathStyle == "auto" && c.UploadS3Endpoint != "")
	b, err := uploads.NewS3(ctx, uploads.S3Config{Bucket: c.UploadS3Bucket, Endpoint: c.UploadS3Endpoint,
		Region: c.UploadS3Region, Prefix: c.UploadS3Prefix, PathStyle: pathStyle})
	if err != nil {
		return nil, err
	}
	where := []any{"bucket", c.UploadS3Bucket, "endpoint", c.UploadS3Endpoint, "prefix", c.UploadS3Prefix}
	checkCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := b.Check(checkCtx); err != nil {
		log.Error("upload storage not reachable; uploads answer unavailable until it is",
			append(where, "err", err)...)
	} else {
		log.Info("uploads stored in S3", where...)
	}
	return b, nil
}

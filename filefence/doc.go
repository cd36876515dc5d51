// Package filefence makes fenced writes to a directory, for jobs that
// publish files: a write carries the writer's fencing token and replaces the
// file only when the token is not below the highest token accepted for that
// file name (docs/design.md §5), so a job that lost its lock while paused cannot
// overwrite the output of the job that took over.
//
//	d, err := filefence.Open("/srv/reports")
//	if err != nil { ... }
//	defer d.Close()
//
//	err = d.WriteFile(ctx, "daily.csv", grant.Token, data, 0o644)
//	var stale *fence.StaleTokenError
//	if errors.As(err, &stale) {
//		// A job with token stale.Required or later has published:
//		// this one lost its lock and must stop.
//	}
//
// Readers need nothing: they open /srv/reports/daily.csv as usual and see
// the old content or the new, never a part.
//
// # How a write is made atomic
//
//  1. The content is written to a new temporary file in the same directory
//     and synced (fsync). A token already below the watermark is rejected
//     before anything is written.
//  2. An exclusive flock is taken on the name's lock file,
//     .fence/NAME.lock. flock locks belong to an open file description, and
//     every call opens the lock file anew, so writers exclude each other
//     whether they are goroutines, two Dir values or separate processes.
//  3. Under the lock the watermark, .fence/NAME.token, is read and the rule
//     applied; a stale token is rejected and the temporary file removed.
//  4. When the token is above the watermark, the new watermark is written
//     to .fence/NAME.token-tmp, synced, renamed over .fence/NAME.token and
//     the .fence directory synced.
//  5. The temporary file is renamed over NAME and the directory synced.
//  6. The lock is released.
//
// The watermark is raised, durably, before the file is replaced: after a
// crash at any point the watermark is at least the token of every file
// content that may have reached the disk. A crash between steps 4 and 5
// leaves the watermark raised and the old file in place, which only makes
// older tokens fail; the writer may retry with the same token.
//
// Temporary files (".fence-tmp-...") of a writer that died are never
// mistaken for data, since no valid name starts with ".fence"; Open and
// CleanTemp remove them. A live writer holds a lock on its temporary file,
// so cleaning never removes a write in progress.
//
// # One step around your own code
//
// Dir is a fence.Guard: Do runs a function under the name's lock, after the
// check and the raise of the watermark, and the Dir's writes made with the
// function's context run under that same lock. The httpfence middleware
// and the grpcfence interceptors take a Dir directly (the request's object
// is the file name), so a handler publishes a file as one fenced step:
//
//	mw, _ := httpfence.New(httpfence.Config{Guard: d})
//	// in the handler:
//	object, t, _ := guard.TokenFrom(r.Context())
//	err := guard.Do(r.Context(), func(ctx context.Context) error {
//		return d.WriteFile(ctx, object, t, body, 0o644)
//	})
//
// Files are not transactional: if the function fails after writing, what
// it wrote stays, and so does the raised watermark (see Dir.Do).
//
// # Scope and limits
//
// Watermarks are per file name and survive Remove: a stale writer cannot
// recreate a removed file. A name's watermark and lock file stay in
// SidecarDir for good (a few bytes per name ever written); delete them by
// hand only when no writer with an older token can still be running. Every process that writes the directory must do
// so through a Dir. flock works between processes of one machine; on
// network file systems (NFS, SMB) whether it excludes writers on other
// machines depends on the server, so use a local file system. On platforms
// without flock the package builds, but every write fails with
// errors.ErrUnsupported.
package filefence

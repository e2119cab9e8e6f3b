package admin

import (
	"io"
	"net/http"
)

// maxWebhookBody bounds what a webhook call may send: a Git host's push
// event runs to tens of kilobytes, and it is read only to be ignored (the
// poll finds what changed itself; nothing the caller says is trusted).
const maxWebhookBody = 1 << 20

// registerGitPoll adds POST /v1/sources/git/poll, the webhook that makes
// the Git source poll at once. It is a write (the write token): a caller
// makes Pylon ask the Git host; the source makes a burst of calls one
// poll, and its polls at least git.Options.MinGap apart.
func registerGitPoll(mux *http.ServeMux, g guard, who *authors) {
	poll := g.o.PollGit
	mux.HandleFunc("POST /v1/sources/git/poll", g.write(audited(g.o.logger(), who, func(w http.ResponseWriter, r *http.Request) {
		if poll == nil {
			writeJSON(w, http.StatusNotFound, apiError{Error: "no Git source: this Pylon was not started with --config-git"})
			return
		}
		if _, err := io.Copy(io.Discard, http.MaxBytesReader(w, r.Body, maxWebhookBody)); err != nil {
			fail(w, err)
			return
		}
		poll()
		writeJSON(w, http.StatusAccepted, map[string]string{"status": "poll requested"})
	})))
}

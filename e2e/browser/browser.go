// Package browser starts the headless Chromium that the dashboard's
// end-to-end tests and its load benchmark drive (chromedp): Debian's
// chromium package, which .ci/run installs when it is missing.
package browser

import (
	"context"
	"errors"
	"os/exec"

	"github.com/chromedp/chromedp"
)

// Path finds the Chromium binary on PATH.
func Path() (string, error) {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", errors.New("browser: no chromium binary on PATH: install Debian's chromium package (.ci/run does)")
}

// Start launches Chromium with one tab of width×height and returns the
// tab's chromedp context and the function that stops the browser. The
// context has no deadline: the first run of a chromedp context owns the
// browser, so callers bound their own actions with contexts derived from
// it.
func Start(width, height int) (context.Context, func(), error) {
	path, err := Path()
	if err != nil {
		return nil, nil, err
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox, // CI runs as root, where Chromium's sandbox refuses to start
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(width, height),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	stop := func() { cancelTab(); cancelAlloc() }
	if err := chromedp.Do(ctx); err != nil {
		stop()
		return nil, nil, err
	}
	return ctx, stop, nil
}

// Package browser drives a real browser in tests: headless Chromium from
// Debian's chromium package, through the DevTools protocol (chromedp), so
// that tests load floe's HTML audit report and status page as a person
// would, read the DOM the browser built, and take screenshots.
//
// It is for tests only. Where Chromium is not installed the test is
// skipped with a message, and fails under FLOE_REQUIRE_SERVERS=1 (see
// internal/testenv); .ci/install-servers.sh installs it.
package browser

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/floe-dev/floe/internal/testenv"
)

// ScreenshotsEnv names a folder that Screenshot also writes its PNG files
// to, to refresh the pictures under docs/ from the tests that take them.
const ScreenshotsEnv = "FLOE_SCREENSHOTS"

// New starts a headless Chromium for t, closed in t.Cleanup, and returns a
// context of one tab, 1200 pixels wide. Every chromedp action on it is
// bounded by timeout.
func New(t testing.TB, timeout time.Duration) context.Context {
	t.Helper()
	path := testenv.Tool(t, "chromium", "apt-get install chromium")
	// A fresh profile, and no background traffic: the machines floe is
	// tested on reach no network beyond loopback, and component updates,
	// sync or QUIC probes would only stall or log errors.
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Headless,
		chromedp.NoSandbox, // tests run as root, where Chromium's sandbox refuses to start
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.Flag("mute-audio", true),
		chromedp.WindowSize(1200, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.WithoutCancel(t.Context()), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	// The first Run starts the browser; a browser that cannot start fails
	// here, with Chromium's own message.
	if err := chromedp.Do(ctx); err != nil {
		cancelTab()
		cancelAlloc()
		t.Fatalf("start chromium (%s): %v", path, err)
	}
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc()
	})
	tctx, cancel := context.WithTimeout(ctx, timeout)
	t.Cleanup(cancel)
	return tctx
}

// Screenshot saves a PNG of the whole page as name in the test's temporary
// folder (and in $FLOE_SCREENSHOTS when set) and returns its path.
func Screenshot(t testing.TB, ctx context.Context, name string) string {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	if dir := os.Getenv(ScreenshotsEnv); dir != "" {
		if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
			t.Fatalf("save screenshot in %s=%s: %v", ScreenshotsEnv, dir, err)
		}
	}
	return path
}

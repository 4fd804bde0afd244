package llm

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/config"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/egress"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
)

// pngBytes is a 1×1 PNG.
var pngBytes, _ = base64.StdEncoding.DecodeString("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")

var pngDataURL = "data:image/png;base64," + base64.StdEncoding.EncodeToString(pngBytes)

func visionModel(name string, fallbacks ...string) config.Model {
	m := chatModel(name, fallbacks...)
	m.Capabilities = []string{CapChat, CapVision}
	return m
}

// imageGateway has OpenAI-compatible and Gemini models with and without
// vision; no upstream is called by prepare.
func imageGateway(t *testing.T) *Gateway {
	g, _ := newGateway(t,
		provider("openai", TypeOpenAI, "http://127.0.0.1:1/v1", visionModel("vision"), chatModel("blind"),
			visionModel("vision-then-gemini", "gemini/gemini-vision"), visionModel("vision-then-blind", "openai/blind")),
		provider("gemini", TypeGemini, "http://127.0.0.1:1/v1beta", visionModel("gemini-vision")),
	)
	return g
}

func imageRequest(model string, parts ...Part) *Request {
	return &Request{Model: model, Messages: []Message{
		{Role: RoleSystem, Content: "Describe images."},
		{Role: RoleUser, Content: "look", Parts: parts},
	}}
}

func imagePart(url string) Part { return Part{Image: &Image{URL: url}} }

// wantImageError checks err is of kind k and names param.
func wantImageError(t *testing.T, err error, k errs.Kind, param, contains string) {
	t.Helper()
	var e *errs.Error
	if !errors.As(err, &e) {
		t.Fatalf("want a %s error naming %s, got %v", k, param, err)
	}
	if e.Kind != k || e.Details["param"] != param || !strings.Contains(e.Message, contains) {
		t.Fatalf("got %s %q (details %v); want %s naming %s, containing %q", e.Kind, e.Message, e.Details, k, param, contains)
	}
}

func TestNormaliseImages_DataURLs(t *testing.T) {
	g := imageGateway(t)
	big := "data:image/png;base64," + strings.Repeat("A", (MaxImageBytes/3+2)*4)
	unpadded := strings.TrimRight(pngDataURL, "=")
	tests := []struct {
		name     string
		url      string
		wantType string
		kind     errs.Kind
		contains string
	}{
		{name: "png", url: pngDataURL, wantType: "image/png"},
		{name: "upper-case type and base64 marker", url: "data:IMAGE/PNG;BASE64," + base64.StdEncoding.EncodeToString(pngBytes), wantType: "image/png"},
		{name: "unpadded base64", url: unpadded, wantType: "image/png"},
		{name: "jpeg", url: "data:image/jpeg;base64,/9j/4AAQ", wantType: "image/jpeg"},
		{name: "svg refused", url: "data:image/svg+xml;base64,PHN2Zz4=", kind: errs.Invalid, contains: `"image/svg+xml"`},
		{name: "no media type", url: "data:;base64,AAAA", kind: errs.Invalid, contains: `type ""`},
		{name: "not base64", url: "data:image/png,rawbytes", kind: errs.Invalid, contains: "not base64"},
		{name: "bad base64", url: "data:image/png;base64,!!!!", kind: errs.Invalid, contains: "not valid base64"},
		{name: "no comma", url: "data:image/png;base64", kind: errs.Invalid, contains: "without a comma"},
		{name: "empty data", url: "data:image/png;base64,", kind: errs.Invalid, contains: "is empty"},
		{name: "too large", url: big, kind: errs.Invalid, contains: "at most 20971520 bytes"},
		{name: "http refused", url: "http://example.com/cat.png", kind: errs.Invalid, contains: `"http" URL`},
		{name: "file refused", url: "file:///etc/passwd", kind: errs.Invalid, contains: `"file" URL`},
		{name: "relative refused", url: "cat.png", kind: errs.Invalid, contains: `"schemeless" URL`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := imageRequest("openai/vision", Part{Text: "look"}, imagePart(tc.url))
			_, err := g.prepare(context.Background(), OpCompatChat, r)
			if tc.kind != "" {
				wantImageError(t, err, tc.kind, "messages[1].content[1]", tc.contains)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			img := r.Messages[1].Parts[1].Image
			if img.URL != "" || img.MediaType != tc.wantType || len(img.Data) == 0 {
				t.Fatalf("image %q %q %d bytes", img.URL, img.MediaType, len(img.Data))
			}
			if tc.wantType == "image/png" && !bytes.Equal(img.Data, pngBytes) {
				t.Errorf("decoded %x", img.Data)
			}
		})
	}
}

func TestNormaliseImages_BytesAndLimits(t *testing.T) {
	g := imageGateway(t)
	ctx := context.Background()
	t.Run("bytes of an accepted type pass", func(t *testing.T) {
		r := imageRequest("openai/vision", Part{Image: &Image{Data: pngBytes, MediaType: "image/png"}})
		if _, err := g.prepare(ctx, OpCompatChat, r); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("bytes of another type are refused", func(t *testing.T) {
		r := imageRequest("openai/vision", Part{Image: &Image{Data: []byte("%PDF"), MediaType: "application/pdf"}})
		_, err := g.prepare(ctx, OpCompatChat, r)
		wantImageError(t, err, errs.Invalid, "messages[1].content[0]", `"application/pdf"`)
	})
	t.Run("too many images", func(t *testing.T) {
		parts := make([]Part, MaxImages+1)
		for i := range parts {
			parts[i] = imagePart(pngDataURL)
		}
		_, err := g.prepare(ctx, OpCompatChat, imageRequest("openai/vision", parts...))
		wantImageError(t, err, errs.Invalid, "messages[1].content[100]", "at most 100 images")
	})
	t.Run("a model without vision is refused naming the capability", func(t *testing.T) {
		_, err := g.prepare(ctx, OpCompatChat, imageRequest("openai/blind", imagePart(pngDataURL)))
		var e *errs.Error
		if !errors.As(err, &e) || e.Kind != errs.Invalid || e.Details["capability"] != CapVision || !strings.Contains(e.Message, "does not support vision") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("the same model without images is fine", func(t *testing.T) {
		if _, err := g.prepare(ctx, OpCompatChat, &Request{Model: "openai/blind", Messages: []Message{{Role: RoleUser, Content: "hi"}}}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("fallbacks without vision are skipped", func(t *testing.T) {
		m, _ := g.Catalog.Lookup("openai/vision-then-blind")
		r := imageRequest(m.ID, imagePart(pngDataURL))
		if c := g.candidates(ctx, OpCompatChat, m, r); len(c) != 1 {
			t.Errorf("candidates %d, want only the model itself", len(c))
		}
		if c := g.candidates(ctx, OpCompatChat, m, &Request{Model: m.ID, Messages: []Message{{Role: RoleUser, Content: "hi"}}}); len(c) != 2 {
			t.Errorf("without images the fallback stays: %d candidates", len(c))
		}
	})
	t.Run("an image is estimated at a fixed count", func(t *testing.T) {
		plain := &Request{Messages: []Message{{Role: RoleUser, Content: "look"}}}
		high := &Request{Messages: []Message{{Role: RoleUser, Content: "look", Parts: []Part{{Text: "look"}, imagePart(pngDataURL)}}}}
		low := &Request{Messages: []Message{{Role: RoleUser, Content: "look", Parts: []Part{{Text: "look"}, {Image: &Image{URL: pngDataURL, Detail: "low"}}}}}}
		base := estimatePromptTokens("gpt-4o", plain)
		if got := estimatePromptTokens("gpt-4o", high) - base; got != ImageTokensHigh {
			t.Errorf("high detail image counted %d", got)
		}
		if got := estimatePromptTokens("gpt-4o", low) - base; got != ImageTokensLow {
			t.Errorf("low detail image counted %d", got)
		}
	})
}

// imageHost is an https image server on loopback.
func imageHost(t *testing.T) *httptest.Server {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/cat.png":
			w.Header().Set("Content-Type", "image/png")
			_, _ = w.Write(pngBytes)
		case "/octet":
			w.Header().Set("Content-Type", "application/octet-stream")
			_, _ = w.Write(pngBytes)
		case "/page.html":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			_, _ = w.Write([]byte("<html></html>"))
		case "/huge.png": // declared too large
			w.Header().Set("Content-Type", "image/png")
			w.Header().Set("Content-Length", "30000000")
			_, _ = w.Write(pngBytes)
		case "/endless.png": // chunked, no length, too large
			w.Header().Set("Content-Type", "image/png")
			chunk := bytes.Repeat([]byte{0}, 1<<20)
			for i := 0; i <= MaxImageBytes>>20; i++ {
				if _, err := w.Write(chunk); err != nil {
					return
				}
				w.(http.Flusher).Flush()
			}
		case "/slow.png": // answers after the fetch timed out
			time.Sleep(time.Second)
			w.Header().Set("Content-Type", "image/png")
			_, _ = w.Write(pngBytes)
		case "/to-http":
			http.Redirect(w, r, "http://"+r.Host+"/cat.png", http.StatusFound)
		case "/to-cat":
			http.Redirect(w, r, "/cat.png", http.StatusFound)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// testFetcher fetches through a guard allowing allow, trusting srv's
// certificate, each fetch bounded by timeout.
func testFetcher(t *testing.T, srv *httptest.Server, timeout time.Duration, allow ...string) *ImageFetcher {
	guard, err := egress.New(allow)
	if err != nil {
		t.Fatal(err)
	}
	tr := guard.Transport().Clone() // keeps the guarded dialer
	tr.TLSClientConfig = srv.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	return &ImageFetcher{client: &http.Client{Transport: tr, Timeout: timeout, CheckRedirect: httpsRedirects}}
}

func TestNormaliseImages_HTTPSURLs(t *testing.T) {
	srv := imageHost(t)
	g := imageGateway(t)
	g.Images = testFetcher(t, srv, 10*time.Second, "127.0.0.1/32")
	ctx := context.Background()
	const field = "messages[1].content[0]"
	tests := []struct {
		name, model, path string
		fetched           bool
		kind              errs.Kind
		contains          string
	}{
		{name: "passed to an OpenAI-compatible model", model: "openai/vision", path: "/cat.png"},
		{name: "fetched for Gemini", model: "gemini/gemini-vision", path: "/cat.png", fetched: true},
		{name: "fetched when a Gemini fallback may answer", model: "openai/vision-then-gemini", path: "/cat.png", fetched: true},
		{name: "octet-stream is sniffed", model: "gemini/gemini-vision", path: "/octet", fetched: true},
		{name: "redirect to https followed", model: "gemini/gemini-vision", path: "/to-cat", fetched: true},
		{name: "not an image", model: "gemini/gemini-vision", path: "/page.html", kind: errs.Invalid, contains: `served as "text/html"`},
		{name: "declared too large", model: "gemini/gemini-vision", path: "/huge.png", kind: errs.Invalid, contains: "is 30000000 bytes"},
		{name: "too large", model: "gemini/gemini-vision", path: "/endless.png", kind: errs.Invalid, contains: "more than 20971520 bytes"},
		{name: "not found", model: "gemini/gemini-vision", path: "/missing.png", kind: errs.Invalid, contains: "answered 404"},
		{name: "redirect to http refused", model: "gemini/gemini-vision", path: "/to-http", kind: errs.Invalid, contains: "https only"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			url := srv.URL + tc.path + "?X-Amz-Signature=s3cr3t"
			r := imageRequest(tc.model, imagePart(url))
			_, err := g.prepare(ctx, OpCompatChat, r)
			if tc.kind != "" {
				wantImageError(t, err, tc.kind, field, tc.contains)
				if strings.Contains(err.Error(), "s3cr3t") || strings.Contains(err.Error(), tc.path) {
					t.Errorf("the error quotes the URL's path or query: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			img := r.Messages[1].Parts[0].Image
			if !tc.fetched {
				if img.URL != url || img.Data != nil {
					t.Fatalf("URL not passed on: %+v", img)
				}
				return
			}
			if img.URL != "" || img.MediaType != "image/png" || !bytes.Equal(img.Data, pngBytes) {
				t.Fatalf("not fetched: %q %q %d bytes", img.URL, img.MediaType, len(img.Data))
			}
		})
	}
	t.Run("timeout", func(t *testing.T) {
		g := imageGateway(t)
		g.Images = testFetcher(t, srv, 200*time.Millisecond, "127.0.0.1/32")
		_, err := g.prepare(ctx, OpCompatChat, imageRequest("gemini/gemini-vision", imagePart(srv.URL+"/slow.png")))
		wantImageError(t, err, errs.Invalid, field, "could not be fetched from https://127.0.0.1")
	})
	t.Run("loopback refused unless allowed", func(t *testing.T) {
		g := imageGateway(t)
		g.Images = testFetcher(t, srv, time.Second)
		_, err := g.prepare(ctx, OpCompatChat, imageRequest("gemini/gemini-vision", imagePart(srv.URL+"/cat.png")))
		wantImageError(t, err, errs.EgressDenied, field, "loopback")
	})
	t.Run("the default fetcher refuses loopback too", func(t *testing.T) {
		g := imageGateway(t)
		_, err := g.prepare(ctx, OpCompatChat, imageRequest("gemini/gemini-vision", imagePart(srv.URL+"/cat.png")))
		wantImageError(t, err, errs.EgressDenied, field, "egress denied")
	})
}

func TestImageDataURL(t *testing.T) {
	if got := ImageDataURL(&Image{Data: pngBytes, MediaType: "image/png"}); got != pngDataURL {
		t.Errorf("got %s", got)
	}
	if got := ImageDataURL(&Image{URL: "https://x.test/a.png"}); got != "https://x.test/a.png" {
		t.Errorf("got %s", got)
	}
}

func FuzzDecodeDataURL(f *testing.F) {
	for _, s := range []string{pngDataURL, "data:image/png;base64,", "data:,", "data:image/gif;charset=x;base64,R0lG", "data:image/webp;base64,UklGRg"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, u string) {
		if !hasScheme(u, "data") {
			return
		}
		img := &Image{URL: u}
		err := decodeDataURL("messages[0].content[0]", img)
		if err != nil {
			if errs.KindOf(err) != errs.Invalid || img.URL != u || img.Data != nil {
				t.Fatalf("%q: refused with %v but changed the image to %+v", u, err, img)
			}
			return
		}
		if img.URL != "" || len(img.Data) == 0 || len(img.Data) > MaxImageBytes || checkImage("x", img.MediaType, len(img.Data)) != nil {
			t.Fatalf("%q: accepted as %q, %d bytes", u, img.MediaType, len(img.Data))
		}
	})
}

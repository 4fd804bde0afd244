package llm

import (
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/egress"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
)

// Images in chat content. Before any provider sees a request the gateway
// normalises its images (Gateway.prepare calls normaliseImages):
//
//   - the model asked for must declare the vision capability (400
//     otherwise); fallbacks without it are skipped;
//   - a data: URL is decoded (base64 only) into Image.Data and MediaType;
//   - an https URL is left as it is when every candidate model's provider
//     fetches image URLs itself (OpenAI-compatible servers take image_url,
//     Anthropic a url source), and fetched otherwise (Gemini's inline_data
//     needs the bytes; its file_data takes only files uploaded to Google):
//     through the egress guard, within ImageFetchTimeout, at most
//     MaxImageBytes, and only when it is an image of an accepted type;
//   - any other scheme (http:, file:, ...) is a 400.
//
// Every image, however it came, must be image/png, image/jpeg, image/gif
// or image/webp and at most MaxImageBytes; a request carries at most
// MaxImages images and MaxImageBytesPerRequest bytes of them. Errors name
// the part: messages[i].content[j].

// Image limits.
const (
	// MaxImageBytes bounds one image, decoded or fetched (20 MiB).
	MaxImageBytes = 20 << 20
	// MaxImageBytesPerRequest bounds the images of one request together.
	MaxImageBytesPerRequest = 50 << 20
	// MaxImages bounds the images of one request.
	MaxImages = 100
	// ImageFetchTimeout bounds the fetch of one https image URL.
	ImageFetchTimeout = 10 * time.Second
	// imageFetchers is how many image URLs of a request are fetched at once.
	imageFetchers = 4
)

// ImageMediaTypes are the image types accepted in chat content.
var ImageMediaTypes = []string{"image/png", "image/jpeg", "image/gif", "image/webp"}

// Token estimates for an image when the upstream reports no usage:
// OpenAI's count for a low-detail image, and for a 1024×1024 image at high
// detail (its 512-pixel tiles at 170 tokens each plus 85).
const (
	ImageTokensLow  = 85
	ImageTokensHigh = 765
)

// imageTokens is the fixed token estimate of an image.
func imageTokens(img *Image) int {
	if img.Detail == "low" {
		return ImageTokensLow
	}
	return ImageTokensHigh
}

// ImageFetcher fetches the https image URLs of requests whose providers
// need the bytes. The zero value is not usable; NewImageFetcher builds one.
type ImageFetcher struct {
	client *http.Client
}

// NewImageFetcher returns a fetcher whose requests dial through guard (so
// loopback, private and other special-purpose addresses are refused unless
// the operator allows their range), each bounded by ImageFetchTimeout.
// Redirects are followed as egress.CheckRedirect allows, and only to https.
func NewImageFetcher(guard *egress.Guard) *ImageFetcher {
	c := guard.Client(ImageFetchTimeout)
	c.CheckRedirect = httpsRedirects
	return &ImageFetcher{client: c}
}

// httpsRedirects is egress.CheckRedirect, refusing redirects to http too.
func httpsRedirects(req *http.Request, via []*http.Request) error {
	if err := egress.CheckRedirect(req, via); err != nil {
		return err
	}
	if req.URL.Scheme != "https" {
		return errs.E(errs.Invalid, "redirected to a %q URL; images are fetched over https only", req.URL.Scheme)
	}
	return nil
}

var (
	defaultFetcherOnce sync.Once
	defaultFetcher     *ImageFetcher
)

// imageFetcher is g.Images, or a fetcher over a guard that allows no
// special-purpose range at all.
func (g *Gateway) imageFetcher() *ImageFetcher {
	if g.Images != nil {
		return g.Images
	}
	defaultFetcherOnce.Do(func() {
		guard, _ := egress.New(nil) // cannot fail without ranges
		defaultFetcher = NewImageFetcher(guard)
	})
	return defaultFetcher
}

// passesImageURLs reports whether m's provider fetches https image URLs
// itself, so that the gateway passes them on: OpenAI-compatible servers
// (image_url) and Anthropic (a url source). Gemini needs the bytes.
func passesImageURLs(m *Model) bool {
	switch m.Type() {
	case TypeOpenAI, TypeAnthropic:
		return true
	}
	return false
}

// normaliseImages checks and normalises the images of r for m and the
// fallbacks that may answer it (see the comment at the top of this file).
// A request without images costs one pass over its messages.
func (g *Gateway) normaliseImages(ctx context.Context, op Op, m *Model, r *Request) error {
	if !HasImages(r.Messages) {
		return nil
	}
	if !m.Has(CapVision) {
		return capabilityError(m, CapVision)
	}
	fetch := false
	for _, c := range g.candidates(ctx, op, m, r) {
		fetch = fetch || !passesImageURLs(c)
	}
	var (
		pending []imageRef
		n       int
		total   int64
	)
	for i := range r.Messages {
		for j := range r.Messages[i].Parts {
			img := r.Messages[i].Parts[j].Image
			if img == nil {
				continue
			}
			n++
			field := fmt.Sprintf("messages[%d].content[%d]", i, j)
			if n > MaxImages {
				return imageError(field, "is image %d; a request carries at most %d images", n, MaxImages)
			}
			switch {
			case img.URL == "":
				if err := checkImage(field, img.MediaType, len(img.Data)); err != nil {
					return err
				}
			case hasScheme(img.URL, "data"):
				if err := decodeDataURL(field, img); err != nil {
					return err
				}
			case hasScheme(img.URL, "https"):
				if fetch {
					pending = append(pending, imageRef{field: field, img: img})
				}
				continue
			default:
				return imageError(field, "must be an https or a data: URL, got a %q URL", scheme(img.URL))
			}
			total += int64(len(img.Data))
		}
	}
	if err := g.imageFetcher().fetchAll(ctx, pending); err != nil {
		return err
	}
	for _, p := range pending {
		total += int64(len(p.img.Data))
	}
	if total > MaxImageBytesPerRequest {
		return errs.E(errs.Invalid, "the images of this request add up to %d bytes; at most %d bytes (%d MiB) per request", total, MaxImageBytesPerRequest, MaxImageBytesPerRequest>>20).
			WithDetails(map[string]any{"param": "messages", "limit": MaxImageBytesPerRequest})
	}
	return nil
}

// hasImages reports whether m carries an image.
func (m *Message) hasImages() bool {
	for _, p := range m.Parts {
		if p.Image != nil {
			return true
		}
	}
	return false
}

// visionOK reports whether m can take r's images.
func visionOK(m *Model, r *Request) bool { return m.Has(CapVision) || !HasImages(r.Messages) }

// imageRef is an image to fetch and the field naming it.
type imageRef struct {
	field string
	img   *Image
}

// imageError is the 400 naming an image part.
func imageError(field, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	return errs.E(errs.Invalid, "%s %s", field, msg).
		WithDetails(map[string]any{"param": field, "problems": []errs.Problem{{Field: field, Problem: msg}}})
}

func hasScheme(u, s string) bool {
	return len(u) > len(s) && u[len(s)] == ':' && strings.EqualFold(u[:len(s)], s)
}

// scheme returns u's scheme, for messages (never the rest of the URL,
// which may carry a signature).
func scheme(u string) string {
	if i := strings.IndexByte(u, ':'); i > 0 && i < 16 {
		return strings.ToLower(u[:i])
	}
	return "schemeless"
}

// checkImage checks an image's media type and size.
func checkImage(field, mediaType string, size int) error {
	if !slices.Contains(ImageMediaTypes, mediaType) {
		return imageError(field, "is of type %q; images must be one of %s", mediaType, strings.Join(ImageMediaTypes, ", "))
	}
	if size == 0 {
		return imageError(field, "is empty")
	}
	if size > MaxImageBytes {
		return imageError(field, "is %d bytes; an image may be at most %d bytes (%d MiB)", size, MaxImageBytes, MaxImageBytes>>20)
	}
	return nil
}

// decodeDataURL decodes img.URL, a data: URL, into img.Data and MediaType.
func decodeDataURL(field string, img *Image) error {
	meta, payload, ok := strings.Cut(img.URL[len("data:"):], ",")
	if !ok {
		return imageError(field, "is a data: URL without a comma before its data; send data:<type>;base64,<data>")
	}
	params := strings.Split(meta, ";")
	mediaType := strings.ToLower(strings.TrimSpace(params[0]))
	if !slices.ContainsFunc(params[1:], func(p string) bool { return strings.EqualFold(strings.TrimSpace(p), "base64") }) {
		return imageError(field, "is a data: URL that is not base64; send data:%s;base64,<data>", cmp.Or(mediaType, "image/png"))
	}
	if err := checkImage(field, mediaType, 1); err != nil {
		return err
	}
	if base64.StdEncoding.DecodedLen(len(payload)) > MaxImageBytes+2 {
		return imageError(field, "is about %d bytes; an image may be at most %d bytes (%d MiB)", base64.StdEncoding.DecodedLen(len(payload)), MaxImageBytes, MaxImageBytes>>20)
	}
	enc := base64.StdEncoding
	if !strings.HasSuffix(payload, "=") && len(payload)%4 != 0 {
		enc = base64.RawStdEncoding
	}
	data, err := enc.DecodeString(payload)
	if err != nil {
		return imageError(field, "is a data: URL whose data is not valid base64 (%v)", err)
	}
	if err := checkImage(field, mediaType, len(data)); err != nil {
		return err
	}
	img.Data, img.MediaType, img.URL = data, mediaType, ""
	return nil
}

// fetchAll fetches refs, imageFetchers at a time, and returns the first
// error (in the order of refs).
func (f *ImageFetcher) fetchAll(ctx context.Context, refs []imageRef) error {
	if len(refs) == 0 {
		return nil
	}
	errsOut := make([]error, len(refs))
	sem := make(chan struct{}, imageFetchers)
	var wg sync.WaitGroup
	for i := range refs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errsOut[i] = f.fetch(ctx, refs[i])
		}()
	}
	wg.Wait()
	for _, err := range errsOut {
		if err != nil {
			return err
		}
	}
	return nil
}

// fetch GETs ref's https URL and stores the image in it. The URL is named
// in errors by its scheme and host only: its path and query may carry a
// signature.
func (f *ImageFetcher) fetch(ctx context.Context, ref imageRef) error {
	u, err := url.Parse(ref.img.URL)
	if err != nil || u.Host == "" {
		return imageError(ref.field, "is not a valid https URL")
	}
	where := "https://" + u.Host
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ref.img.URL, nil)
	if err != nil {
		return imageError(ref.field, "is not a valid https URL")
	}
	req.Header.Set("Accept", strings.Join(ImageMediaTypes, ", "))
	resp, err := f.client.Do(req)
	if err != nil {
		var e *errs.Error
		if errors.As(err, &e) && e.Kind == errs.EgressDenied {
			d := map[string]any{"param": ref.field}
			for k, v := range e.Details {
				d[k] = v
			}
			return errs.E(errs.EgressDenied, "%s: the image at %s cannot be fetched: %s", ref.field, where, e.Message).WithDetails(d)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var ue *url.Error
		if errors.As(err, &ue) && ue.Timeout() {
			return imageError(ref.field, "could not be fetched from %s within %s; send the image as a data: URL", where, ImageFetchTimeout)
		}
		return imageError(ref.field, "could not be fetched from %s (%s); send the image as a data: URL", where, fetchCause(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return imageError(ref.field, "could not be fetched: %s answered %d", where, resp.StatusCode)
	}
	if resp.ContentLength > MaxImageBytes {
		return imageError(ref.field, "is %d bytes at %s; an image may be at most %d bytes (%d MiB)", resp.ContentLength, where, MaxImageBytes, MaxImageBytes>>20)
	}
	mediaType, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxImageBytes+1))
	if err != nil {
		return imageError(ref.field, "could not be read from %s (%s)", where, fetchCause(err))
	}
	if len(data) > MaxImageBytes {
		return imageError(ref.field, "is more than %d bytes at %s; an image may be at most %d bytes (%d MiB)", MaxImageBytes, where, MaxImageBytes, MaxImageBytes>>20)
	}
	if mediaType == "" || mediaType == "application/octet-stream" {
		mediaType, _, _ = mime.ParseMediaType(http.DetectContentType(data))
	}
	if !slices.Contains(ImageMediaTypes, mediaType) {
		return imageError(ref.field, "at %s is served as %q; images must be one of %s", where, mediaType, strings.Join(ImageMediaTypes, ", "))
	}
	if err := checkImage(ref.field, mediaType, len(data)); err != nil {
		return err
	}
	ref.img.Data, ref.img.MediaType, ref.img.URL = data, mediaType, ""
	return nil
}

// fetchCause describes a fetch error without the URL it may quote.
func fetchCause(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var e *errs.Error
	if errors.As(err, &e) {
		return e.Message
	}
	return err.Error()
}

// ImageDataURL is img as a data: URL (its URL when it has no bytes).
func ImageDataURL(img *Image) string {
	if len(img.Data) == 0 {
		return img.URL
	}
	return "data:" + img.MediaType + ";base64," + base64.StdEncoding.EncodeToString(img.Data)
}

package tools

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"image"
	"image/draw"
	_ "image/gif" // decoder for read
	"image/jpeg"
	"image/png"

	"github.com/pibot/pibot/llm"
)

// Image limits of read, as in pi.
const (
	maxImageSide   = 2000
	maxImageBase64 = 4.5 * 1024 * 1024
)

// sniffImage returns the MIME type of a JPEG, PNG, GIF or WebP by magic
// bytes, or "".
func sniffImage(b []byte) string {
	switch {
	case len(b) >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF:
		return "image/jpeg"
	case len(b) >= 8 && string(b[:8]) == "\x89PNG\r\n\x1a\n":
		return "image/png"
	case len(b) >= 6 && (string(b[:6]) == "GIF87a" || string(b[:6]) == "GIF89a"):
		return "image/gif"
	case len(b) >= 12 && string(b[:4]) == "RIFF" && string(b[8:12]) == "WEBP":
		return "image/webp"
	}
	return ""
}

// readImage returns pi's image result, resized to at most 2000x2000 and
// 4.5 MB of base64 when needed.
func readImage(data []byte, mime string) llm.ToolOutput {
	enc := base64.StdEncoding.EncodeToString(data)
	cfg, _, cfgErr := image.DecodeConfig(bytes.NewReader(data))
	fits := len(enc) < maxImageBase64
	if cfgErr == nil {
		fits = fits && cfg.Width <= maxImageSide && cfg.Height <= maxImageSide
	}
	if fits {
		return llm.ToolOutput{Content: []llm.Content{
			llm.TextBlock("Read image file [" + mime + "]"),
			llm.ImageBlock(enc, mime),
		}}
	}
	img, _, err := image.Decode(bytes.NewReader(data))
	if err != nil {
		return textOutput("Read image file ["+mime+"]\n[Image omitted: could not be resized below the inline image size limit.]", nil)
	}
	ow, oh := img.Bounds().Dx(), img.Bounds().Dy()
	w, h := ow, oh
	if w > maxImageSide {
		h = roundDiv(h*maxImageSide, w)
		w = maxImageSide
	}
	if h > maxImageSide {
		w = roundDiv(w*maxImageSide, h)
		h = maxImageSide
	}
	for {
		small := scale(img, w, h)
		for _, c := range encodings(small) {
			if len(c.data) < maxImageBase64 {
				note := fmt.Sprintf("Read image file [%s]\n[Image: original %dx%d, displayed at %dx%d. Multiply coordinates by %.2f to map to original image.]",
					c.mime, ow, oh, w, h, float64(ow)/float64(w))
				return llm.ToolOutput{Content: []llm.Content{llm.TextBlock(note), llm.ImageBlock(c.data, c.mime)}}
			}
		}
		if w == 1 && h == 1 {
			break
		}
		w, h = max(1, w*3/4), max(1, h*3/4)
	}
	return textOutput("Read image file ["+mime+"]\n[Image omitted: could not be resized below the inline image size limit.]", nil)
}

func roundDiv(a, b int) int { return (2*a + b) / (2 * b) }

type encoded struct{ data, mime string }

// encodings returns PNG then JPEG at decreasing quality, like pi.
func encodings(img image.Image) []encoded {
	var out []encoded
	var buf bytes.Buffer
	if png.Encode(&buf, img) == nil {
		out = append(out, encoded{base64.StdEncoding.EncodeToString(buf.Bytes()), "image/png"})
	}
	for _, q := range []int{80, 85, 70, 55, 40} {
		buf.Reset()
		if jpeg.Encode(&buf, img, &jpeg.Options{Quality: q}) == nil {
			out = append(out, encoded{base64.StdEncoding.EncodeToString(buf.Bytes()), "image/jpeg"})
		}
	}
	return out
}

// scale resizes src to w x h by averaging the source pixels of each
// destination pixel (a box filter).
func scale(src image.Image, w, h int) *image.RGBA {
	b := src.Bounds()
	rgba := image.NewRGBA(image.Rect(0, 0, b.Dx(), b.Dy()))
	draw.Draw(rgba, rgba.Bounds(), src, b.Min, draw.Src)
	dst := image.NewRGBA(image.Rect(0, 0, w, h))
	sw, sh := b.Dx(), b.Dy()
	for y := 0; y < h; y++ {
		y0, y1 := y*sh/h, max((y+1)*sh/h, y*sh/h+1)
		for x := 0; x < w; x++ {
			x0, x1 := x*sw/w, max((x+1)*sw/w, x*sw/w+1)
			var r, g, bl, a, n int
			for sy := y0; sy < y1; sy++ {
				off := sy*rgba.Stride + x0*4
				for sx := x0; sx < x1; sx++ {
					r += int(rgba.Pix[off])
					g += int(rgba.Pix[off+1])
					bl += int(rgba.Pix[off+2])
					a += int(rgba.Pix[off+3])
					off += 4
					n++
				}
			}
			o := y*dst.Stride + x*4
			dst.Pix[o], dst.Pix[o+1], dst.Pix[o+2], dst.Pix[o+3] = uint8(r/n), uint8(g/n), uint8(bl/n), uint8(a/n)
		}
	}
	return dst
}

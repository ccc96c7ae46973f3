"""Deterministic synthetic graphics for the benchmark corpus (bench/corpus/synthetic/).

Imported by make_corpus.py (system interpreter: Debian's python3-pil and numpy, and the DejaVu
fonts of fonts-dejavu-core). Every image comes from fixed seeds, fixed text and fixed geometry, so
the same Debian packages give the same pixels. The set covers what lossless codecs meet outside
photos and what issue 12 lists as l3 v1's worst cases: smooth gradients, chessboards, a
black-and-white text page, label masks, dithered images and screenshot-like UI renderings.

synthetic_items(photo) yields (file name, make) pairs; make() returns a PIL image. `photo(name,
w, h)` returns a centred RGB crop of a decoded JPEG photo, w x h landscape and h x w when the photo
is upright (the dithered images start from one).
"""
import numpy as np
from PIL import Image, ImageDraw, ImageFont

FONT_DIR = "/usr/share/fonts/truetype/dejavu"

WORDS = (
    "lossless image codec tile parallel decode warp entropy context residual predictor gradient "
    "palette colour transform dataset shard loader stream reader batch pixel sample plane alpha "
    "offset table header version bitstream reversible wavefront kernel benchmark corpus photo "
    "graphics mask label the of and to in is that for it as with was on be by at this from or"
).split()


def font(name, size):
    return ImageFont.truetype(f"{FONT_DIR}/{name}.ttf", size)


def ramp(a, b, t):
    """Linear blend of two RGB colours by t in [0, 1] (array), rounded to 8 bits."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return np.round(a + (b - a) * t[..., None]).astype(np.uint8)


def gradient_gray(w, h):
    xx = np.tile(np.arange(w, dtype=np.float64), (h, 1))
    return Image.fromarray(np.round(xx / (w - 1) * 255).astype(np.uint8), "L")


def gradient_radial(w, h):
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
    r = np.hypot(xx - w * 0.35, yy - h * 0.4) / np.hypot(w, h) * 1.6
    return Image.fromarray(ramp((250, 220, 120), (40, 20, 90), np.clip(r, 0, 1)), "RGB")


def gradient_sky(w, h):
    """Vertical two-colour blend, as in many rendered wallpapers."""
    t = np.tile(np.linspace(0, 1, h)[:, None], (1, w))
    return Image.fromarray(ramp((18, 52, 120), (200, 225, 245), t), "RGB")


def chessboard(w, h, square, dark, light):
    yy, xx = np.mgrid[0:h, 0:w]
    on = ((yy // square + xx // square) % 2).astype(bool)
    dark, light = np.asarray(dark, np.uint8), np.asarray(light, np.uint8)
    px = np.where(on[..., None], light, dark) if dark.ndim else np.where(on, light, dark)
    return Image.fromarray(px.astype(np.uint8), "RGB" if dark.ndim else "L")


def words(rng, n):
    return " ".join(WORDS[i] for i in rng.integers(0, len(WORDS), n))


def wrap(draw, text, fnt, width):
    lines, line = [], ""
    for word in text.split():
        cand = word if not line else line + " " + word
        if draw.textlength(cand, font=fnt) <= width:
            line = cand
        else:
            lines.append(line)
            line = word
    return lines + [line]


def text_page(w, h, size, antialias, seed):
    """A page of text (A4 at 150 dpi for the bilevel one): title and paragraphs."""
    rng = np.random.default_rng(seed)
    im = Image.new("L", (w, h), 255)
    d = ImageDraw.Draw(im)
    if not antialias:
        d.fontmode = "1"  # bilevel glyphs: the page holds only 0 and 255
    margin, y = w // 10, h // 14
    title = font("DejaVuSerif-Bold", size * 2)
    d.text((margin, y), "Issue 12: " + words(rng, 4), font=title, fill=0)
    y += size * 4
    body = font("DejaVuSerif", size)
    while y < h - h // 12:
        for line in wrap(d, words(rng, int(rng.integers(40, 90))), body, w - 2 * margin):
            if y >= h - h // 12:
                break
            d.text((margin, y), line, font=body, fill=0)
            y += int(size * 1.45)
        y += size
    return im


def voronoi_mask(rng, w, h, n_seeds, n_labels):
    """Gray label mask: nearest-seed regions, a few label values."""
    sx = rng.integers(0, w, n_seeds)
    sy = rng.integers(0, h, n_seeds)
    labels = rng.integers(0, n_labels, n_seeds)
    yy, xx = np.mgrid[0:h, 0:w]
    best = np.full((h, w), np.inf)
    out = np.zeros((h, w), np.uint8)
    for i in range(n_seeds):
        d = (xx - sx[i]) ** 2 + (yy - sy[i]) ** 2
        m = d < best
        best[m] = d[m]
        out[m] = labels[i]
    return out


def voronoi_rgb(w, h, n_seeds, n_labels, seed):
    """RGB label map: nearest-seed regions painted from a random palette (Cityscapes style)."""
    rng = np.random.default_rng(seed)
    labels = voronoi_mask(rng, w, h, n_seeds, n_labels)
    pal = rng.integers(0, 256, (n_labels, 3), dtype=np.uint8)
    return Image.fromarray(pal[labels], "RGB")


def dither_fs_palette(im, colours):
    """Floyd-Steinberg dither to a median-cut palette of `colours` colours (Pillow)."""
    pal = im.quantize(colours, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    return im.quantize(palette=pal, dither=Image.Dither.FLOYDSTEINBERG).convert("RGB")


def dither_bayer(im, levels):
    """Ordered dither (8x8 Bayer matrix) of each channel to `levels` levels."""
    b = np.array([[0]])
    for _ in range(3):
        b = np.block([[4 * b, 4 * b + 2], [4 * b + 3, 4 * b + 1]])
    a = np.asarray(im, np.float64) / 255 * (levels - 1)
    h, w = a.shape[:2]
    thr = ((np.tile(b, (h // 8 + 1, w // 8 + 1))[:h, :w] + 0.5) / 64)[..., None]
    q = np.minimum(np.floor(a) + (a - np.floor(a) > thr), levels - 1)
    return Image.fromarray(np.round(q * 255 / (levels - 1)).astype(np.uint8), "RGB")


def dither_bilevel(im):
    """1-bit Floyd-Steinberg of the gray image (Pillow's convert('1')), stored as 0/255 gray."""
    return im.convert("L").convert("1").convert("L")


THEMES = {
    "light": dict(bg=(246, 246, 248), side=(229, 231, 236), bar=(52, 101, 164), text=(30, 30, 30),
                  muted=(120, 124, 130), card=(255, 255, 255), line=(210, 212, 218)),
    "dark": dict(bg=(32, 34, 38), side=(44, 47, 52), bar=(24, 26, 29), text=(225, 226, 228),
                 muted=(140, 144, 150), card=(40, 43, 48), line=(62, 66, 72)),
}


def ui_screenshot(w, h, theme, seed):
    """A screenshot-like rendering: title bar, sidebar list, toolbar buttons, cards with text,
    a line chart and icons; anti-aliased text and shapes as a desktop renders them."""
    t, rng = THEMES[theme], np.random.default_rng(seed)
    im = Image.new("RGB", (w, h), t["bg"])
    d = ImageDraw.Draw(im)
    sans, bold = font("DejaVuSans", 13), font("DejaVuSans-Bold", 15)
    d.rectangle((0, 0, w, 34), fill=t["bar"])
    d.text((14, 9), "l3 dataset browser - " + words(rng, 2), font=bold, fill=(255, 255, 255))
    for i, c in enumerate(((237, 85, 59), (246, 190, 0), (90, 180, 90))):
        d.ellipse((w - 80 + 22 * i, 11, w - 66 + 22 * i, 25), fill=c)
    d.rectangle((0, 35, 220, h), fill=t["side"])
    for i in range(24):
        y = 50 + 28 * i
        if i == 3:
            d.rounded_rectangle((8, y - 4, 212, y + 20), 6, fill=t["bar"])
        d.ellipse((18, y + 2, 30, y + 14), fill=tuple(int(v) for v in rng.integers(60, 230, 3)))
        d.text((40, y), words(rng, 2), font=sans, fill=t["text"])
    x0 = 240
    for i in range(6):
        d.rounded_rectangle((x0 + 104 * i, 48, x0 + 96 + 104 * i, 76), 8, outline=t["line"], fill=t["card"])
        d.text((x0 + 14 + 104 * i, 55), words(rng, 1)[:10], font=sans, fill=t["text"])
    for r in range(2):
        for c in range(3):
            cx, cy = x0 + c * ((w - x0 - 20) // 3), 92 + r * 300
            cw, ch = (w - x0 - 20) // 3 - 16, 280
            d.rounded_rectangle((cx, cy, cx + cw, cy + ch), 10, fill=t["card"], outline=t["line"])
            d.text((cx + 14, cy + 12), words(rng, 3), font=bold, fill=t["text"])
            if (r + c) % 2 == 0:
                pts = [(cx + 14 + k * (cw - 28) / 30, cy + 200 - 90 * rng.random()) for k in range(31)]
                d.line(pts, fill=t["bar"] if theme == "light" else (110, 170, 255), width=2)
                d.line((cx + 14, cy + 210, cx + cw - 14, cy + 210), fill=t["line"], width=1)
            else:
                for k, line in enumerate(wrap(d, words(rng, 45), sans, cw - 28)[:12]):
                    d.text((cx + 14, cy + 44 + 18 * k), line, font=sans, fill=t["muted"])
    return im


def synthetic_items(photo):
    yield "syn_gradient_gray_1024x768.png", lambda: gradient_gray(1024, 768)
    yield "syn_gradient_radial_1024x768.png", lambda: gradient_radial(1024, 768)
    yield "syn_gradient_sky_1920x1080.png", lambda: gradient_sky(1920, 1080)
    yield "syn_chess_1px_512.png", lambda: chessboard(512, 512, 1, 0, 255)
    yield "syn_chess_8px_1024.png", lambda: chessboard(1024, 1024, 8, 0, 255)
    yield "syn_chess_rgb_32px_1024x768.png", lambda: chessboard(1024, 768, 32, (118, 150, 86), (238, 238, 210))
    yield "syn_text_bw_1240x1754.png", lambda: text_page(1240, 1754, 22, False, 12)
    yield "syn_text_gray_1024x768.png", lambda: text_page(1024, 768, 15, True, 13)
    yield "syn_labels_rgb_1024x768.png", lambda: voronoi_rgb(1024, 768, 150, 19, 14)
    yield "syn_labels_rgb_1920x1080.png", lambda: voronoi_rgb(1920, 1080, 400, 34, 15)
    yield "syn_dither_fs16_1024x768.png", lambda: dither_fs_palette(photo("picosdeeuropa", 1024, 768), 16)
    yield "syn_dither_bayer8_1024x768.png", lambda: dither_bayer(photo("sunset", 1024, 768), 2)
    yield "syn_dither_bw_768x1024.png", lambda: dither_bilevel(photo("friends", 1024, 768))
    yield "syn_ui_light_1280x800.png", lambda: ui_screenshot(1280, 800, "light", 16)
    yield "syn_ui_dark_1280x800.png", lambda: ui_screenshot(1280, 800, "dark", 17)

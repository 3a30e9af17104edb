"""mp4 writing and probing (imageio-ffmpeg). The written file is the truth: achieved size, fps and frame count are
measured by reading it back, never copied from what was asked for."""

from __future__ import annotations

import hashlib
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import imageio_ffmpeg
import numpy as np

#: H.264 settings for rollouts: visually lossless enough that flow and features survive encoding
CRF = 18
PRESET = "medium"


class VideoWriter:
    """Streams uint8 RGB frames into an H.264 mp4 through an ffmpeg subprocess (which encodes on its own core)."""

    def __init__(self, path: str | Path, width: int, height: int, fps: float, crf: int = CRF, preset: str = PRESET):
        if width % 2 or height % 2:
            raise ValueError(f"H.264 yuv420p needs even frame sizes, got {width}x{height}")
        self.path, self.size, self.n = Path(path), (int(width), int(height)), 0
        self._gen = imageio_ffmpeg.write_frames(
            str(self.path), self.size, fps=float(fps), codec="libx264", pix_fmt_out="yuv420p", quality=None,
            macro_block_size=2, output_params=["-crf", str(crf), "-preset", preset], ffmpeg_log_level="error",
        )
        self._gen.send(None)

    def write(self, frames: np.ndarray) -> None:
        frames = np.asarray(frames)
        if frames.ndim == 3:
            frames = frames[None]
        if frames.dtype != np.uint8 or frames.shape[1:] != (self.size[1], self.size[0], 3):
            raise ValueError(f"expected uint8 frames of shape (T, {self.size[1]}, {self.size[0]}, 3), got "
                             f"{frames.dtype} {frames.shape}")
        for f in frames:
            self._gen.send(np.ascontiguousarray(f))
            self.n += 1

    def close(self) -> None:
        if self._gen is not None:
            self._gen.close()
            self._gen = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


@dataclass
class VideoInfo:
    width: int
    height: int
    fps: float
    frames: int
    seconds: float

    def to_dict(self) -> dict:
        return {"width": self.width, "height": self.height, "fps": self.fps, "frames": self.frames,
                "seconds": self.seconds}


_STREAM = re.compile(rb"Stream #0:\d+.*?: Video: .*?, (\d{2,5})x(\d{2,5})[, \[].*?(?:, ([\d.]+) fps|, ([\d.]+) tbr)")


def probe_video(path: str | Path) -> VideoInfo:
    """Measure a video file by decoding it once with ffmpeg: size and fps from the stream header, frames counted
    while decoding. Raises ``ValueError`` for a file ffmpeg cannot read or that has no video frames."""
    path = str(path)
    cmd = [imageio_ffmpeg.get_ffmpeg_exe(), "-hide_banner", "-nostdin", "-i", path, "-map", "0:v:0", "-vf", "null",
           "-f", "null", "-"]
    r = subprocess.run(cmd, capture_output=True, timeout=600)
    out = r.stderr
    m = _STREAM.search(out)
    frames = None
    secs = 0.0
    for line in reversed(out.replace(b"\r", b"\n").splitlines()):
        if line.startswith(b"frame="):
            frames = int(re.search(rb"frame=\s*(\d+)", line).group(1))
            t = re.search(rb"time=\s*(\d+):(\d+):([\d.]+)", line)
            if t:
                secs = int(t.group(1)) * 3600 + int(t.group(2)) * 60 + float(t.group(3))
            break
    if r.returncode != 0 or m is None or not frames:
        tail = out.decode(errors="ignore").strip().splitlines()[-1:] or ["no output"]
        raise ValueError(f"{path}: not a readable video with frames ({tail[0]})")
    fps = float(m.group(3) or m.group(4))
    return VideoInfo(int(m.group(1)), int(m.group(2)), fps, int(frames), float(secs))


def read_frames(path: str | Path, size: tuple[int, int] | None = None, meta_out: dict | None = None,
                decoder_threads: int | None = None):
    """Yield uint8 RGB frames (H, W, 3), optionally resized by ffmpeg to ``size`` = (width, height). ``meta_out``
    receives the container's metadata (``fps``, ``source_size``) before the first frame is yielded.
    ``decoder_threads``: ffmpeg's decoding threads (None: ffmpeg's choice, one per core)."""
    kw = {"output_params": ["-vf", f"scale={size[0]}:{size[1]}:flags=area"]} if size else {}
    if decoder_threads:
        kw["input_params"] = ["-threads", str(int(decoder_threads))]
    gen = imageio_ffmpeg.read_frames(str(path), pix_fmt="rgb24", **kw)
    meta = gen.__next__()
    if meta_out is not None:
        meta_out.update(meta)
    w, h = size if size else meta["size"]
    for buf in gen:
        yield np.frombuffer(buf, np.uint8).reshape(h, w, 3)


def sha256_file(path: str | Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(chunk)
            if not b:
                break
            h.update(b)
    return h.hexdigest()

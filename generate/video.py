"""mp4 writing and probing (imageio-ffmpeg). The written file is the truth: achieved size, fps and frame count are
measured by reading it back, never copied from what was asked for."""

from __future__ import annotations

import errno
import hashlib
import os
import re
import subprocess
import sys
import threading
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import imageio_ffmpeg
import numpy as np

#: H.264 settings for rollouts: visually lossless enough that flow and features survive encoding
CRF = 18
PRESET = "medium"
#: x264's output depends on its thread count (the same 268 frames encoded with 1, 2, 3, 4 and 6 threads gave five
#: different files), and ffmpeg's default count follows the CPUs the process may use at that moment: one encoder
#: thread makes a rollout's bytes the same on every run and every machine (the encoder still has its own process)
ENCODER_THREADS = 1


class EncoderError(RuntimeError):
    """The video encoder (ffmpeg) failed; its last lines of output are in the message."""


#: the phrases of an encoder's output that mean the disk (or the user's quota) is full
DISK_FULL = ("no space left on device", "disk quota exceeded")
_STDERR_KEEP = 16 << 10  # the last bytes of ffmpeg's output kept for an error message


def _disk_full_error(path: Path, detail: str) -> OSError:
    """``OSError(ENOSPC)``, whose message names the file (the caller says what to do: it knows the run)."""
    return OSError(errno.ENOSPC, f"the video encoder could not write {path}: no space left on device ({detail})")


class VideoWriter:
    """Streams uint8 RGB frames into an H.264 mp4 through an ffmpeg subprocess (which encodes on its own core).

    The encoder's exit status is checked on :meth:`close` and its output kept: a full disk is an ``OSError`` with
    ``errno.ENOSPC`` (message "no space left on device ... <file>"), any other failure an :class:`EncoderError` with
    ffmpeg's last line, never a silently broken file. The command is the one ``imageio_ffmpeg.write_frames`` runs
    (same bytes out)."""

    def __init__(self, path: str | Path, width: int, height: int, fps: float, crf: int = CRF, preset: str = PRESET):
        if width % 2 or height % 2:
            raise ValueError(f"H.264 yuv420p needs even frame sizes, got {width}x{height}")
        self.path, self.size, self.n = Path(path), (int(width), int(height)), 0
        rate = fps if isinstance(fps, Fraction) else Fraction(float(fps)).limit_denominator()
        cmd = [imageio_ffmpeg.get_ffmpeg_exe(), "-y", "-f", "rawvideo", "-vcodec", "rawvideo",
               "-s", f"{self.size[0]}x{self.size[1]}", "-pix_fmt", "rgb24", "-r", str(rate), "-i", "-", "-an",
               "-vcodec", "libx264", "-pix_fmt", "yuv420p", "-v", "error", "-crf", str(crf), "-preset", preset,
               "-threads", str(ENCODER_THREADS), str(self.path)]
        # its own process group, as imageio_ffmpeg does: Ctrl-C reaches Python, which then stops the encoder
        self._p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                   start_new_session=sys.platform != "win32")
        self._err = bytearray()
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()

    def _drain(self) -> None:
        for chunk in iter(lambda: self._p.stderr.read1(4096), b""):
            self._err += chunk
            del self._err[:-_STDERR_KEEP]

    def _failure(self, cause: BaseException | None = None) -> Exception:
        """The error of a failed encoder (waited for): disk full, or its last line of output."""
        try:
            self._p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._p.kill()
            self._p.wait()
        self._reader.join(timeout=5)
        text = self._err.decode(errors="replace")
        lines = [ln.strip() for ln in text.replace("\r", "\n").splitlines() if ln.strip()]
        if isinstance(cause, OSError) and cause.errno in (errno.ENOSPC, errno.EDQUOT):
            return _disk_full_error(self.path, os.strerror(cause.errno))
        full = next((ln for ln in lines if any(p in ln.lower() for p in DISK_FULL)), None)
        if full is not None:
            return _disk_full_error(self.path, f"ffmpeg: {full}")
        why = lines[-1] if lines else (f"{type(cause).__name__}: {cause}" if cause else "no output")
        return EncoderError(f"the video encoder (ffmpeg) failed writing {self.path} (exit status "
                            f"{self._p.returncode}: {why})")

    def write(self, frames: np.ndarray) -> None:
        frames = np.asarray(frames)
        if frames.ndim == 3:
            frames = frames[None]
        if frames.dtype != np.uint8 or frames.shape[1:] != (self.size[1], self.size[0], 3):
            raise ValueError(f"expected uint8 frames of shape (T, {self.size[1]}, {self.size[0]}, 3), got "
                             f"{frames.dtype} {frames.shape}")
        if self._p is None:
            raise ValueError(f"{self.path}: the video writer is closed")
        for f in frames:
            try:
                self._p.stdin.write(np.ascontiguousarray(f).data)
            except OSError as e:  # the encoder stopped (a broken pipe): its own output says why
                self._close_pipe()
                raise self._failure(e) from None
            self.n += 1

    def _close_pipe(self) -> None:
        try:
            self._p.stdin.close()
        except OSError:
            pass

    def close(self) -> None:
        """Finish the file; raises if the encoder failed (see the class)."""
        if self._p is None:
            return
        try:
            self._close_pipe()
            err = self._failure() if self._p.wait() != 0 else None
        finally:
            self._finish()
        if err is not None:
            raise err

    def abort(self) -> None:
        """Stop the encoder without finishing the file (the record is being discarded)."""
        if self._p is None:
            return
        self._close_pipe()
        self._p.kill()
        self._p.wait()
        self._finish()

    def _finish(self) -> None:
        self._reader.join(timeout=5)
        self._p.stderr.close()
        self._p = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if exc[0] is None:
            self.close()
        else:
            self.abort()


@dataclass
class VideoInfo:
    width: int
    height: int
    fps: float
    frames: int
    seconds: float
    #: the stream's display rotation in degrees (its display matrix), which decoding applies: width and height are
    #: the decoded (displayed) size, never the coded one; 0 for an upright stream. Not part of :meth:`to_dict`
    rotation: float = 0.0
    #: whether the display matrix also mirrors the picture (a flip; ffmpeg applies it while decoding and prints only
    #: an angle, so it is measured: see :func:`_display_transform`). Not part of :meth:`to_dict`
    mirrored: bool = False
    #: for a variable-frame-rate stream, how it was made constant (empty for a constant-rate one): the frames and
    #: fps above are the constant-rate ones, which is what :func:`read_frames` yields. Not part of :meth:`to_dict`
    resampled: str = ""
    #: the stream's own (average) fps as its header gives it, which is what evaluate checks the record's fps against
    stream_fps: float = 0.0

    def to_dict(self) -> dict:
        return {"width": self.width, "height": self.height, "fps": self.fps, "frames": self.frames,
                "seconds": self.seconds}

    @property
    def display(self) -> str:
        """What the display matrix does to the coded picture, in words ('' for an upright stream)."""
        turn = round(self.rotation) % 360
        if self.mirrored and turn == 0:
            return "mirrors it left to right"
        if self.mirrored and turn == 180:
            return "mirrors it top to bottom"
        said = f"rotates it by {self.rotation:g} degrees" if turn else ""
        return f"{said} and mirrors it" if self.mirrored else said


_ROTATION = re.compile(rb"[Dd]isplay ?[Mm]atrix: rotation of (-?[\d.]+) degrees|\brotate\s*:\s*(-?\d+)")
_OUT_FPS = re.compile(rb"Output #0.*?Stream #0:\d+.*?: Video: .*?, ([\d.]+) fps", re.S)
_STREAM = re.compile(rb"Stream #0:\d+.*?: Video: .*?, (\d{2,5})x(\d{2,5})[, \[].*?(?:, ([\d.]+) fps|, ([\d.]+) tbr)")


def probe_video(path: str | Path) -> VideoInfo:
    """Measure a video file by decoding it once with ffmpeg as :func:`read_frames` decodes it: at a constant frame
    rate (``-fps_mode cfr``, the rate ffmpeg gives the decoded stream), size from the decoded stream, frames counted
    while decoding. A variable-frame-rate stream is resampled to that constant rate (frames duplicated or dropped,
    counted, said in ``resampled``), so import records the very frames evaluate reads. Raises ``ValueError`` for a
    file ffmpeg cannot read or that has no video frames."""
    path = str(path)
    cmd = [imageio_ffmpeg.get_ffmpeg_exe(), "-hide_banner", "-nostdin", "-i", path, "-map", "0:v:0", "-fps_mode", "cfr",
           "-vf", "null", "-f", "null", "-"]
    r = subprocess.run(cmd, capture_output=True, timeout=600)
    out = r.stderr
    m = _STREAM.search(out)
    frames = None
    secs = 0.0
    dup = drop = 0
    for line in reversed(out.replace(b"\r", b"\n").splitlines()):
        if line.startswith(b"frame="):
            frames = int(re.search(rb"frame=\s*(\d+)", line).group(1))
            dd = re.search(rb"dup=\s*(\d+)\s+drop=\s*(\d+)", line)
            dup, drop = (int(dd.group(1)), int(dd.group(2))) if dd else (0, 0)
            t = re.search(rb"time=\s*(\d+):(\d+):([\d.]+)", line)
            if t:
                secs = int(t.group(1)) * 3600 + int(t.group(2)) * 60 + float(t.group(3))
            break
    if r.returncode != 0 or m is None or not frames:
        tail = out.decode(errors="ignore").strip().splitlines()[-1:] or ["no output"]
        raise ValueError(f"{path}: not a readable video with frames ({tail[0]})")
    fps = stream_fps = float(m.group(3) or m.group(4))
    o = _OUT_FPS.search(out)  # the constant rate the frames were counted at (and read_frames yields)
    resampled = ""
    if dup or drop:
        rate = float(o.group(1)) if o else fps
        resampled = (f"variable frame rate (the stream averages {fps:g} fps): resampled to a constant {rate:g} fps as "
                     f"it decodes, {frames} frames ({dup} duplicated, {drop} dropped)")
        fps = rate
    width, height = int(m.group(1)), int(m.group(2))
    rot = _ROTATION.search(out)
    rotation, mirrored = (float(rot.group(1) or rot.group(2)) % 360 if rot else 0.0), False
    if rot:  # the printed angle hides flips (a left-right mirror prints as 180 degrees): measure what decoding does
        rotation, mirrored = _display_transform(path, (width, height), rotation)
    if round(rotation) % 180 == 90:  # ffmpeg rotates while decoding (read_frames too): the frames are this size
        width, height = height, width
    return VideoInfo(width, height, fps, int(frames), float(secs), rotation=rotation, mirrored=mirrored,
                     resampled=resampled, stream_fps=stream_fps)


def _first_frame(path: str, *args: str) -> np.ndarray | None:
    """The first frame in grey, flat (None where ffmpeg cannot decode it)."""
    cmd = [imageio_ffmpeg.get_ffmpeg_exe(), "-hide_banner", "-nostdin", "-loglevel", "error", *args, "-i", path,
           "-map", "0:v:0", "-frames:v", "1", "-f", "rawvideo", "-pix_fmt", "gray", "-"]
    r = subprocess.run(cmd, capture_output=True, timeout=120)
    return None if r.returncode or not r.stdout else np.frombuffer(r.stdout, np.uint8)


def _display_transform(path: str, coded_size: tuple[int, int], printed: float) -> tuple[float, bool]:
    """The rotation (degrees counter-clockwise, ffmpeg's convention) and mirroring that decoding applies, measured by
    decoding the first frame as coded (``-noautorotate``) and as displayed and matching the eight flips and quarter
    turns; the printed angle (and no mirror) where the frames cannot tell (a flat first frame)."""
    w, h = coded_size
    coded, shown = _first_frame(path, "-noautorotate"), _first_frame(path)
    if coded is None or shown is None or coded.size != w * h or shown.size != w * h or float(coded.std()) < 1.0:
        return printed, False
    coded = coded.reshape(h, w).astype(np.int16)
    best = (np.inf, printed, False)
    for k in range(4):
        turned = np.rot90(coded, k)
        for mirror in (False, True):
            cand = turned[:, ::-1] if mirror else turned
            err = float(np.abs(cand - shown.reshape(cand.shape)).mean())
            if err < best[0]:
                best = (err, 90.0 * k, mirror)
    return best[1], best[2]


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

"""Variable-frame-rate input (issue 29, item 4): the video is measured as it decodes, at the constant rate evaluate
reads it (duplicated or dropped frames counted and said in ``resampled``); import refuses such a video, as evaluate
does, saying how to re-encode it. Before, probe counted 40 decoded frames at the stream's average 10.81 fps while
evaluate read 80 at 20 fps, and refused the imported record."""

import json
import subprocess

import imageio_ffmpeg
import pytest

from worldgate.evaluate.runner import evaluate_run
from worldgate.generate.interop import InteropError, import_video
from worldgate.generate.video import probe_video, read_frames


def _clip(path, vfr: bool):
    """2 s of testsrc at 20 fps (64x48); with ``vfr`` the second second's frames three times as far apart."""
    pts = ["-vf", "setpts='if(lt(N,20),N,20+(N-20)*3)/(20*TB)'", "-fps_mode", "vfr"] if vfr else []
    subprocess.run([imageio_ffmpeg.get_ffmpeg_exe(), "-hide_banner", "-loglevel", "error", "-nostdin", "-y", "-f",
                    "lavfi", "-i", "testsrc=size=64x48:rate=20:duration=2", *pts, "-c:v", "libx264", "-pix_fmt",
                    "yuv420p", str(path)], check=True, capture_output=True, timeout=60)
    return path


def test_probe_counts_the_frames_read_frames_yields(tmp_path):
    vfr, cfr = _clip(tmp_path / "vfr.mp4", True), _clip(tmp_path / "cfr.mp4", False)
    v, c = probe_video(vfr), probe_video(cfr)
    assert (c.frames, c.fps, c.resampled) == (40, 20.0, "")
    assert (v.frames, v.fps) == (80, 20.0) and v.frames == sum(1 for _ in read_frames(vfr))
    assert v.resampled.startswith("variable frame rate (the stream averages 10.81 fps): resampled to a constant 20 "
                                  "fps") and "40 duplicated, 0 dropped" in v.resampled


def test_import_refuses_a_vfr_video_as_evaluate_does_and_takes_a_cfr_one(tmp_path):
    run = tmp_path / "run"
    with pytest.raises(InteropError, match=r"variable frame rate .*not imported \(evaluate would refuse it\): "
                                           r"re-encode it at a constant rate, e.g. ffmpeg -i IN -fps_mode cfr -r 20"):
        import_video(_clip(tmp_path / "vfr.mp4", True), run, "ENGINE-first-real-000_001", "ENGINE",
                     ("first", "real", 0, 1), None, None)
    assert not (run / "ENGINE-first-real-000_001" / "meta.json").exists()
    import_video(_clip(tmp_path / "cfr.mp4", False), run, "ENGINE-first-real-000_002", "ENGINE",
                 ("first", "real", 0, 2), None, None)
    res = evaluate_run(run, progress=False)
    assert not res["errors"] and res["records"] == 1


if __name__ == "__main__":
    pytest.main([__file__])

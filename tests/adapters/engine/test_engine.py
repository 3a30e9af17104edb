import numpy as np
import pytest

from worldgate.adapters import AdapterError, get_adapter
from worldgate.adapters.engine.adapter import transform_intrinsics_crop
from worldgate.adapters.engine.world import ID_AVATAR, ID_SKY, build_world
from worldgate.trajectories import Trajectory
from worldgate.trajectories.suites import Case, engine_intrinsics

SIZE = 96


def case(text="W2", view="first", seed=7, palette="realistic"):
    return Case(id="t", suite="test", trajectory=Trajectory.parse(text), scene={"seed": seed, "palette": palette},
                intrinsics=engine_intrinsics(), image_size=(1024, 1024), view=view)


@pytest.fixture(scope="module")
def engine():
    e = get_adapter("engine", width=SIZE, height=SIZE, threads=1)
    e.load()
    return e


def render_all(engine, c, with_gt=True):
    plan = engine.plan(c)
    chunks = list(engine.rollout(plan, with_gt=with_gt))
    frames = np.concatenate([ch.frames for ch in chunks])
    if not with_gt:
        return plan, frames
    depth = np.concatenate([ch.extra["depth"] for ch in chunks])
    ids = np.concatenate([ch.extra["ids"] for ch in chunks])
    return plan, frames, depth, ids


def test_plan_is_pure_and_deterministic(engine):
    a, b = engine.plan(case("W2 R1")), engine.plan(case("W2 R1"))
    assert a.fingerprint() == b.fingerprint()
    assert a.n_frames == 48 and a.segment_frames == [(0, 32), (32, 48)]
    assert a.intrinsics["regime"] == 4
    assert a.intrinsics["native_hfov_deg"] == pytest.approx(66.0, abs=1e-6)


def test_rollout_deterministic_with_depth_and_ids(engine):
    plan, f1, d1, i1 = render_all(engine, case("W1"))
    _, f2, d2, i2 = render_all(engine, case("W1"))
    assert f1.shape == (16, SIZE, SIZE, 3) and f1.dtype == np.uint8
    np.testing.assert_array_equal(f1, f2)
    np.testing.assert_array_equal(d1, d2)
    np.testing.assert_array_equal(i1, i2)
    sky = i1 == ID_SKY
    assert 0.05 < sky.mean() < 0.8  # a horizon in view
    assert np.all(np.isinf(d1[sky])) and np.all(np.isfinite(d1[~sky]))
    assert len(np.unique(i1)) >= 4  # ground plus several entities
    # textured: neighbouring ground pixels differ (flow and matching need detail)
    ground = f1[0, SIZE * 3 // 4:, :, 1].astype(float)
    assert np.abs(np.diff(ground, axis=1)).mean() > 3.0


def test_each_frame_of_a_rollout_is_its_pose_rendered_alone_with_or_without_gt(engine):
    """The rollout renders straight into its chunks' arrays (and, without GT, reuses one pair for depth and ids):
    every frame, its depth and its ids must still be what rendering that pose alone gives, across a chunk boundary
    and with the third person's avatar drawn in."""
    c = case("W1 R1", view="third")
    plan, frames, depth, ids = render_all(engine, c)
    _, frames_no_gt = render_all(engine, c, with_gt=False)
    np.testing.assert_array_equal(frames, frames_no_gt)
    assert len(frames) > engine.chunk  # a chunk boundary inside
    world, k, c2w, times = engine.world_for(plan), plan.arrays["intrinsics"], plan.arrays["c2w"], plan.arrays["times"]
    walked = np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(c2w[:, :3, 3], axis=0), axis=1))])
    for i in (0, engine.chunk - 1, engine.chunk, len(frames) - 1):
        rgb, d, iid = engine.render(world, c2w[i], k, float(times[i]), True, walked[i] / 0.7)
        np.testing.assert_array_equal(frames[i], rgb)
        np.testing.assert_array_equal(depth[i], d)
        np.testing.assert_array_equal(ids[i], iid)
    assert not np.array_equal(frames[0], frames[-1]) and not np.array_equal(depth[0], depth[-1])


def test_a_faults_new_picture_replaces_the_rendered_frame_in_its_chunk():
    """engine-blur's post_frame returns a new array (blurred, with noise): that picture, not the sharp render the
    chunk's array was given, is the frame."""
    blur = get_adapter("engine-blur", width=SIZE, height=SIZE, threads=1)
    plan = blur.plan(case("W1"))
    frames = np.concatenate([ch.frames for ch in blur.rollout(plan, seed=3)])
    world, k, c2w, times = blur.world_for(plan), plan.arrays["intrinsics"], plan.arrays["c2w"], plan.arrays["times"]
    for i in (0, len(frames) - 1):
        sharp = blur.render(world, c2w[i], k, float(times[i]))[0]
        np.testing.assert_array_equal(frames[i], blur.post_frame(i, sharp))
        assert not np.array_equal(frames[i], sharp)


def test_depth_is_geometrically_consistent_across_frames(engine):
    """Back-project frame 0 with its depth and pose, project into frame 8: the depth there must agree."""
    plan, f, depth, ids = render_all(engine, case("W+R1"))
    K = plan.arrays["intrinsics"]
    P = plan.arrays["c2w"]
    v, u = np.mgrid[0:SIZE, 0:SIZE]
    d0 = depth[0]
    ok = np.isfinite(d0) & (d0 < 15)
    x = ((u + 0.5 - (K[2] + 0.5)) / K[0]) * d0
    y = ((v + 0.5 - (K[3] + 0.5)) / K[1]) * d0
    Xc = np.stack([x[ok], y[ok], d0[ok], np.ones(ok.sum())])
    Xw = P[0] @ Xc
    Xc8 = np.linalg.inv(P[8]) @ Xw
    z8 = Xc8[2]
    u8 = K[0] * Xc8[0] / z8 + K[2]
    v8 = K[1] * Xc8[1] / z8 + K[3]
    inside = (z8 > 0.3) & (u8 > 1) & (u8 < SIZE - 2) & (v8 > 1) & (v8 < SIZE - 2)
    ui, vi = np.round(u8[inside]).astype(int), np.round(v8[inside]).astype(int)
    rel = np.abs(depth[8][vi, ui] - z8[inside]) / z8[inside]
    assert inside.sum() > 1000
    assert np.median(rel) < 0.02  # most points land on themselves (the rest are occlusions / pixel rounding)


def test_yaw_right_moves_content_left(engine):
    plan, f, depth, ids = render_all(engine, case("R1"))
    # the same entity's pixels shift towards smaller u when turning right
    shared = [i for i in np.unique(ids[0]) if i > 1 and (ids[0] == i).sum() > 20 and (ids[6] == i).sum() > 20]
    assert shared
    du = [np.nonzero(ids[6] == i)[1].mean() - np.nonzero(ids[0] == i)[1].mean() for i in shared]
    assert np.median(du) < -3


def test_third_person_draws_avatar_in_lower_middle(engine):
    plan, f, depth, ids = render_all(engine, case("W1", view="third"))
    m = ids[0] == ID_AVATAR
    assert m.mean() > 0.01
    vs, us = np.nonzero(m)
    assert abs(us.mean() - SIZE / 2) < SIZE * 0.05
    assert vs.mean() > SIZE * 0.6
    _, f1, _, ids1 = render_all(engine, case("W1", view="first"))
    assert not (ids1 == ID_AVATAR).any()


def test_events_progress_whether_or_not_in_view():
    w = build_world(11, "realistic", np.zeros((1, 2)))
    kinds = sorted(e.kind for e in w.events)
    assert kinds == ["grow", "recolor", "vanish"]
    s0, t0 = w.state_at(0.0)
    s1, t1 = w.state_at(30.0)  # no rendering in between: state is a function of time only
    grow = next(e for e in w.events if e.kind == "grow")
    assert s0[grow.iid] == 0 and s1[grow.iid] == grow.levels
    rec = next(e for e in w.events if e.kind == "recolor")
    assert not np.allclose(t0[rec.iid], t1[rec.iid])


def test_world_keeps_the_path_clear():
    path = np.stack([np.zeros(50), np.linspace(0, 28, 50)], 1)
    w = build_world(3, "stylised", path)
    from worldgate.adapters.engine.world import G, NX, NZ, VS

    gx = np.round(path[:, 0] / VS + NX / 2).astype(int) % NX
    gz = np.round(path[:, 1] / VS + NZ / 2).astype(int) % NZ
    assert not w.mat[gx, G:G + 9, gz].any()  # nothing at head height on the commanded path


def test_image_conditioned_case_is_refused(engine):
    c = Case(id="img", suite="worldmark", trajectory=Trajectory.parse("W1"), image="x.jpg",
             intrinsics=[800, 800, 511.5, 383.5], image_size=(1024, 768))
    with pytest.raises(AdapterError, match="renders its own scenes"):
        engine.plan(c)


def test_intrinsics_crop_transform_arithmetic():
    # 1024x768 image, centred principal point, cropped to square then scaled to 256
    k, tr = transform_intrinsics_crop([800.0, 800.0, 511.5, 383.5], (1024, 768), (256, 256))
    assert tr["crop_xywh"] == [128.0, 0.0, 768.0, 768.0]
    s = 256 / 768
    assert k == pytest.approx([800 * s, 800 * s, 127.5, 127.5])


def test_palettes_differ():
    a = build_world(5, "realistic").palette
    b = build_world(5, "stylised").palette
    assert np.abs(a - b).mean() > 0.1


def test_sparse_ray_grid_matches_tracing_every_pixel():
    """Pixels between traced samples are filled from their neighbours' planes: the frames must match exact tracing
    but for the odd pixel of geometry thinner than the grid."""
    exact = get_adapter("engine", width=128, height=128, threads=1, sample=1)
    fast = get_adapter("engine", width=128, height=128, threads=0, sample=4)
    c = case("W+R3 L2", view="third", seed=21)
    a = np.concatenate([ch.frames for ch in exact.rollout(exact.plan(c), with_gt=True)])
    chunks = list(fast.rollout(fast.plan(c), with_gt=True))
    b = np.concatenate([ch.frames for ch in chunks])
    differ = np.abs(a.astype(int) - b).max(-1) > 2
    assert a.shape == b.shape and differ.mean() < 1e-3
    with pytest.raises(AdapterError, match="power of two"):
        get_adapter("engine", sample=3)


def _trace_row(world, v, us, t0s, c2w_R, origin, k, tmax=28.0):
    """render._trace_pixels over pixels (us, v) of a 128 px view; returns (t, hit ints) of those pixels."""
    from worldgate.adapters.engine import render
    from worldgate.adapters.engine.world import B, G, VS

    state, _ = world.state_at(0.0)
    hits_t, hits_i = np.zeros((128, 128)), np.zeros((128, 128, 5), np.int32)
    render._trace_pixels(v, np.asarray(us, np.int64), np.asarray(t0s, float), len(us), world.mat, world.inst,
                         world.level, world.occ, world.bits, B, G, world.inst_mode, state, c2w_R, *origin, VS, *k,
                         tmax, hits_t, hits_i)
    return hits_t[v, us], hits_i[v, us]


def test_a_walk_started_in_front_of_its_hit_or_inside_it_finds_the_hit_it_finds_from_the_camera():
    """A fill pixel's trace starts just in front of its neighbours' hits (render.START_MARGIN_REL): crossings are
    computed from each cell's index, so a walk finds the very same hit (t bit for bit, face, voxel, plane) from any
    start in front of it, and a start inside the hit voxel is traced again from the camera."""
    from worldgate.adapters.engine.world import G, NX, NZ, VS

    world = build_world(5)
    k = (64.0, 64.0, 64.0, 64.0)  # fx, fy, cx, cy of a 90-degree 128 px view
    origin = (NX / 2 + 0.37, G + world.eye_height / VS, NZ / 2 + 0.61)
    us = np.arange(128)
    n_hits = 0
    for yaw in (0.0, 0.7, 2.1, 4.0):
        c, s_ = np.cos(yaw), np.sin(yaw)
        R = np.array([[c, 0.0, s_], [0.0, 1.0, 0.0], [-s_, 0.0, c]])
        for v in (40, 64, 70, 90):
            t, i = _trace_row(world, v, us, np.zeros(128), R, origin, k)
            hit = t > 0
            n_hits += int(hit.sum())
            # in front of the hit, just before it, on its face (the walk starts in the hit voxel or the one before)
            for t0 in (np.where(hit, t * 0.9 - 0.3, 3.0), np.where(hit, t - 1e-3, 0.0), np.where(hit, t, 0.0)):
                t2, i2 = _trace_row(world, v, us, np.maximum(t0, 0.0), R, origin, k)
                assert np.array_equal(t2, t) and np.array_equal(i2, i)
    assert n_hits > 1000  # the rows see the world, not the sky


def test_a_wall_at_the_view_distance_is_cut_whole_not_speckled():
    """A voxel is drawn where its depth is below the view distance, whichever way the walk reached it: a camera on the
    grid facing along z sees a wall exactly 28 m away as sky everywhere, and one voxel nearer as wall everywhere."""
    from worldgate.adapters.engine.world import G, NX, NZ, VS

    world = build_world(5)
    mat = np.zeros_like(world.mat)
    mat[:, :G, :] = world.mat[:, :G, :]  # the ground slab only
    k = (64.0, 64.0, 63.5, 63.5)
    origin = (NX / 2, G + 6.0, NZ / 2)
    wall_z = int(NZ / 2 + 28.0 / VS)  # its face plane is 28.0 m (exactly) in front of the camera
    us = np.arange(128)
    for z, drawn in ((wall_z, False), (wall_z - 1, True)):
        m = mat.copy()
        m[:, G: G + 40, z] = 3
        w = _with_mat(world, m)
        rows = [_trace_row(w, v, us, np.zeros(128), np.eye(3), origin, k) for v in range(48, 64)]  # wall, not ground
        t = np.concatenate([r[0] for r in rows])
        on = t > 0
        assert on.all() if drawn else not on.any()
        if drawn:
            assert np.allclose(t, (z - NZ / 2) * VS)


def _with_mat(world, mat):
    """The world with another voxel grid (its occupancy distances and block bits rebuilt)."""
    import dataclasses

    from worldgate.adapters.engine.world import block_fields

    occ, bits = block_fields(mat)
    return dataclasses.replace(world, mat=mat, inst=np.zeros_like(world.inst), level=np.zeros_like(world.level),
                               occ=occ, bits=bits)


def test_a_mirrored_world_is_symmetric_about_the_start_plane_and_keeps_both_sides_clear():
    """``scene.mirror``: voxel x and NX - 1 - x hold the same thing, the commanded path is kept clear on both sides
    (a strafe to the right walks where the kept half's mirror lies), every entity left has its twin, and the first
    frame's depth is its own left-right mirror (the camera stands on the plane, looking along it)."""
    from worldgate.adapters.engine.world import NX, to_grid_xz

    path = np.stack([np.linspace(0.0, 6.0, 40), np.zeros(40)], axis=1)  # a strafe to the right (+X), 6 m
    plain, mir = build_world(11, keepout_xz=path), build_world(11, keepout_xz=path, mirror=True)
    assert np.array_equal(mir.mat, mir.mat[::-1]) and np.array_equal(mir.inst, mir.inst[::-1])
    assert not np.array_equal(plain.mat, plain.mat[::-1])
    gx, gz = to_grid_xz(path[:, 0], path[:, 1])
    zi = np.round(gz).astype(int)

    def clear(w, x):  # eye-level voxels along a path are empty (nothing to walk through)
        return not w.mat[np.round(x).astype(int) % NX, 10:14, zi].any()

    assert clear(plain, gx) and clear(mir, gx) and clear(mir, NX - 1 - gx)
    assert not clear(plain, NX - 1 - gx)  # unmirrored, only the commanded side is kept clear
    names = {e.name for e in mir.entities}
    assert all(f"{e.name}-mirrored" in names for e in mir.entities if "mirror_of" not in e.extra)
    assert all(e.extra["mirror_of"] in names for e in mir.entities if "mirror_of" in e.extra)
    c = Case(id="m", suite="test", trajectory=Trajectory.parse("W1"), scene={"seed": 11, "mirror": True},
             intrinsics=engine_intrinsics(), image_size=(1024, 1024), view="first")
    e = get_adapter("engine", width=64, height=64, threads=1)
    _, _, depth, _ = render_all(e, c)
    d = np.where(np.isfinite(depth[0]), depth[0], 1e3)
    assert np.allclose(d, d[:, ::-1], rtol=1e-4, atol=1e-3)
    _, _, plain_depth, _ = render_all(e, Case(**{**c.__dict__, "scene": {"seed": 11}}))
    p = np.where(np.isfinite(plain_depth[0]), plain_depth[0], 1e3)
    assert not np.allclose(p, p[:, ::-1], rtol=1e-4, atol=1e-3)  # the same scene unmirrored is not


def test_avatar_through_flat_indices_paints_what_its_mask_paints():
    """draw_avatar writes through the sprite's flat indices, or through its boolean mask on non-contiguous frames;
    both paint exactly the mask's pixels, with the sprite's colours, its depth and its id."""
    from worldgate.adapters.engine.avatar import avatar_sprite, draw_avatar

    rng = np.random.default_rng(0)
    H, W = 96, 128
    for phase in (0.0, 0.3, 0.99):
        mask, sprite = avatar_sprite(H, W, int(phase * 8) % 8)
        frames = (rng.integers(0, 256, (H, W, 3), dtype=np.uint8), rng.random((H, W), dtype=np.float32),
                  rng.integers(0, 9, (H, W)).astype(np.int32))
        want = [f.copy() for f in frames]
        want[0][mask], want[1][mask], want[2][mask] = sprite[mask], 1.5, ID_AVATAR
        flat = [f.copy() for f in frames]
        draw_avatar(*flat, phase, ID_AVATAR, 1.5)
        strided = [np.asfortranarray(f) for f in frames]  # not C-contiguous: the mask path
        draw_avatar(*strided, phase, ID_AVATAR, 1.5)
        assert 0 < mask.sum() < H * W
        for a, b, c in zip(want, flat, strided):
            assert np.array_equal(a, b) and np.array_equal(a, c)


def _purity_ceiling():
    """benchmarks/purity_ceiling.py, loaded by path (benchmarks are scripts, not a package)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[3] / "benchmarks" / "purity_ceiling.py"
    spec = importlib.util.spec_from_file_location("purity_ceiling", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_exact_flow_of_the_purity_ceiling_is_the_flow_of_a_strafe_a_yaw_and_an_engine_rollout(engine):
    import cv2

    exact_flow = _purity_ceiling().exact_flow
    k = np.array([100.0, 100.0, 47.5, 47.5])
    eye = np.eye(4)
    # a strafe 0.2 m to the right past a wall 4 m away: every pixel moves left by f t / Z = 5 px; the sky not at all
    right = eye.copy()
    right[0, 3] = 0.2
    depth = np.full((SIZE, SIZE), 4.0, np.float32)
    depth[:10] = np.inf
    fl = exact_flow(depth, eye, right, k)
    np.testing.assert_allclose(fl[10:, :, 0], -5.0, atol=1e-4)
    np.testing.assert_allclose(fl[10:, :, 1], 0.0, atol=1e-4)
    np.testing.assert_allclose(fl[:10], 0.0, atol=1e-4)
    # a yaw moves the sky (points at infinity) as the rotation's homography K R^T K^-1 says; still pixels stay put
    a = np.radians(3.0)
    yaw = eye.copy()
    yaw[:3, :3] = [[np.cos(a), 0, np.sin(a)], [0, 1, 0], [-np.sin(a), 0, np.cos(a)]]
    still = np.zeros((SIZE, SIZE), bool)
    still[-5:] = True
    fl = exact_flow(np.full((SIZE, SIZE), np.inf, np.float32), eye, yaw, k, still)
    Km = np.array([[100.0, 0, 47.5], [0, 100.0, 47.5], [0, 0, 1]])
    Hm = Km @ yaw[:3, :3].T @ np.linalg.inv(Km)
    p = Hm @ np.array([60.0, 20.0, 1.0])
    np.testing.assert_allclose(fl[20, 60], p[:2] / p[2] - [60.0, 20.0], atol=1e-3)
    assert fl[20, 60, 0] < -4  # turning right moves content left
    assert not fl[-5:].any()
    # on a rendered strafe, frame 2 pulled back along the exact flow lands on frame 0 (the conventions agree with the
    # Engine's: pixel centres, OpenCV axes, z-depth)
    plan, f, depth, ids = render_all(engine, case("D1"))
    fl = exact_flow(depth[0], plan.arrays["c2w"][0], plan.arrays["c2w"][2], plan.arrays["intrinsics"])
    v, u = np.mgrid[0:SIZE, 0:SIZE].astype(np.float32)
    back = cv2.remap(f[2], u + fl[..., 0], v + fl[..., 1], cv2.INTER_LINEAR)
    inside = np.isfinite(depth[0]) & (u + fl[..., 0] > 1) & (u + fl[..., 0] < SIZE - 2)
    err = np.abs(back.astype(float) - f[0])[inside].mean()
    still_err = np.abs(f[2].astype(float) - f[0])[inside].mean()
    assert np.abs(fl[..., 0][inside]).mean() > 1.0  # the strafe moved the content
    assert err < 0.35 * still_err, (err, still_err)

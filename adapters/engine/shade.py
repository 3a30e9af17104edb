"""Textures and shading of the Engine's ray caster (numba): the procedural texel pattern of each texture kind, the
texture level of detail, the fixed sun, distance fog and the sky with its clouds, from one row of ray hits.

A hit is (t, face axis, voxel x, h, z) as :func:`~.render.render_frame` traces it; t < 0 is sky. Split from
``render.py`` (the tracing) unchanged: the same arithmetic in the same order, so the frames are byte-identical
(the sky colour is now computed only where it is drawn or fogged in: the same bytes).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from .textures import TK_BRICK, TK_FACADE, TK_GRASS, TK_LEAF, TK_PLAIN, TK_PLANK, TK_STRIPE

TEX = 4  # texels per voxel face edge


@njit(cache=True, error_model="numpy", inline="always")
def _hash(a, b, c, d):
    h = (a * 73856093) ^ (b * 19349663) ^ (c * 83492791) ^ (d * 2654435761)
    h = (h ^ (h >> 13)) * 1274126177
    h = h ^ (h >> 16)
    return (h & 0xFFFF) / 65536.0


@njit(cache=True, error_model="numpy", fastmath=True)
def _value_noise(u, v, seed):
    iu = math.floor(u)
    iv = math.floor(v)
    fu = u - iu
    fv = v - iv
    fu = fu * fu * (3.0 - 2.0 * fu)
    fv = fv * fv * (3.0 - 2.0 * fv)
    a = _hash(np.int64(iu), np.int64(iv), seed, 7)
    b = _hash(np.int64(iu) + 1, np.int64(iv), seed, 7)
    c = _hash(np.int64(iu), np.int64(iv) + 1, seed, 7)
    d = _hash(np.int64(iu) + 1, np.int64(iv) + 1, seed, 7)
    return (a * (1 - fu) + b * fu) * (1 - fv) + (c * (1 - fu) + d * fu) * fv


@njit(cache=True, error_model="numpy", fastmath=True, inline="always")
def _sky(el, h0, h1, h2, k0, k1, k2):
    """The sky's colour at elevation el (sine of the angle above the horizon): horizon (h) to top (k) colour."""
    s = min(max(el * 2.5, 0.0), 1.0)
    return h0 + (k0 - h0) * s, h1 + (k1 - h1) * s, h2 + (k2 - h2) * s


@njit(cache=True, error_model="numpy", fastmath=True)
def shade_row(v, mat, inst, palette, texkind, inst_tint, R, ox, oh, oz, vs, fx, fy, cx, cy, tmax, fog_start,
               sky_top, sky_horizon, clouds, hits_t, hits_i, rgb, depth, ids):
    """Colour, depth and ids of row v from its hits (t < 0: sky)."""
    W = depth.shape[1]
    cm0 = clouds.shape[0] - 1  # the cloud texture's sides are powers of two (world.cloud_texture)
    cm1 = clouds.shape[1] - 1
    h0, h1, h2 = sky_horizon[0], sky_horizon[1], sky_horizon[2]  # scalars for _sky (no array through a helper)
    k0, k1, k2 = sky_top[0], sky_top[1], sky_top[2]
    if True:
        dcy = (v + 0.5 - cy) / fy
        for u in range(W):
            dcx = (u + 0.5 - cx) / fx
            dX = R[0, 0] * dcx + R[0, 1] * dcy + R[0, 2]
            dY = R[1, 0] * dcx + R[1, 1] * dcy + R[1, 2]
            dZ = R[2, 0] * dcx + R[2, 1] * dcy + R[2, 2]
            dn = math.sqrt(dX * dX + dY * dY + dZ * dZ)
            t = hits_t[v, u]
            face = hits_i[v, u, 0]
            x = hits_i[v, u, 1]
            h = hits_i[v, u, 2]
            z = hits_i[v, u, 3]
            if t < 0:
                # sky colour for this direction (also the fog colour, below)
                el = -dY / dn
                sr, sg, sb = _sky(el, h0, h1, h2, k0, k1, k2)
                if el > 0.015:
                    k = 3.0 / (-dY)
                    # the clouds' periodic bilinear sample, written out with masks for the wrap: a helper taking the
                    # texture costs two atomic reference counts per sky pixel (see render._trace_pixels), and % costs
                    # four integer divisions
                    cu = dX * k * 8.0
                    cv = dZ * k * 8.0
                    fu = math.floor(cu)
                    fv = math.floor(cv)
                    a = cu - fu
                    b = cv - fv
                    i0 = int(fu) & cm0
                    j0 = int(fv) & cm1
                    i1 = (i0 + 1) & cm0
                    j1 = (j0 + 1) & cm1
                    cl = ((clouds[i0, j0] * (1 - a) + clouds[i1, j0] * a) * (1 - b)
                          + (clouds[i0, j1] * (1 - a) + clouds[i1, j1] * a) * b)
                    c = min(max((cl - 0.45) * 2.2, 0.0), 1.0) * min(el * 6.0, 1.0)
                    sr = sr + (1.0 - sr) * c
                    sg = sg + (1.0 - sg) * c
                    sb = sb + (1.0 - sb) * c
                rgb[v, u, 0] = np.uint8(min(sr, 1.0) * 255.0)
                rgb[v, u, 1] = np.uint8(min(sg, 1.0) * 255.0)
                rgb[v, u, 2] = np.uint8(min(sb, 1.0) * 255.0)
                depth[v, u] = np.inf
                ids[v, u] = 0
                continue
            m = mat[x, h, z]
            iid = inst[x, h, z]
            # texture coordinates on the hit face
            px = ox + t * dX / vs
            ph = oh - t * dY / vs
            pz = oz + t * dZ / vs
            if face == 0:
                a = ph
                b = pz
            elif face == 1:
                a = px
                b = pz
            else:
                a = px
                b = ph
            fa = a - math.floor(a)
            fb = b - math.floor(b)
            tu = min(int(fa * TEX), TEX - 1)
            tv = min(int(fb * TEX), TEX - 1)
            xi = np.int64(x)
            hi = np.int64(h)
            zi = np.int64(z)
            n = _hash(xi, hi, zi, np.int64(tu * 16 + tv + face * 256))
            vox = _hash(xi, hi, zi, np.int64(99))
            kind = texkind[m]
            f = 0.8 + 0.24 * n + 0.12 * (vox - 0.5)
            if kind == TK_BRICK:
                row = (h * TEX + tv) if face != 1 else tv
                along = (x if face == 2 else z) * TEX + tu
                if face == 1:
                    along = tu
                if row % 2 == 0 or (along + (row // 2 % 2) * 2) % 4 == 0:
                    f = 0.55 + 0.1 * n
                else:
                    f = 0.85 + 0.25 * n
            elif kind == TK_PLANK:
                f = 0.7 + 0.25 * _hash(xi, hi, zi, np.int64(tv)) + 0.1 * n
                if tv == 0:
                    f = 0.5
            elif kind == TK_GRASS:
                blob = _hash(xi >> 2, np.int64(0), zi >> 2, np.int64(5))
                f = 0.65 + 0.35 * n + 0.2 * (blob - 0.5)
            elif kind == TK_PLAIN:
                f = 0.9 + 0.12 * n
            elif kind == TK_FACADE:
                if face != 1 and h % 4 != 0 and (x + z) % 3 != 0:
                    # window glass: dark, reflective gradient
                    f = 0.25 + 0.2 * fb + 0.08 * n
                else:
                    f = 0.8 + 0.2 * n
            elif kind == TK_STRIPE:
                f = 1.0 if ((tu + tv) // 2) % 2 == 0 else 0.6
                f += 0.1 * n
            elif kind == TK_LEAF:
                f = 0.55 + 0.5 * n * n + 0.15 * vox
            # texture level of detail: texels smaller than ~2 pixels fade to their mean instead of aliasing
            # (shimmering texture would make flow and tracking fail on what is a perfectly rigid world)
            texel_px = (vs / TEX) * fx / t
            lod = min(max((texel_px - 0.8) / 1.7, 0.0), 1.0)
            vox_px = vs * fx / t
            lod_v = min(max((vox_px - 0.8) / 1.7, 0.0), 1.0)
            f = 0.9 + (f - 0.9) * (lod + (1.0 - lod) * 0.5 * lod_v)
            # face shading (a fixed sun)
            if face == 1:
                sh = 1.0 if dY > 0 else 0.5
            elif face == 0:
                sh = 0.82 if dX < 0 else 0.68
            else:
                sh = 0.9 if dZ < 0 else 0.62
            cr = palette[m, 0] * inst_tint[iid, 0] * f * sh
            cg = palette[m, 1] * inst_tint[iid, 1] * f * sh
            cb = palette[m, 2] * inst_tint[iid, 2] * f * sh
            dist = t * dn
            if dist > fog_start:
                # the sky colour only where there is fog to blend it in: nearer, fog 0 left c * 1 + sky * 0 = c, so
                # skipping both changes no byte (4-8 % of a frame)
                sr, sg, sb = _sky(-dY / dn, h0, h1, h2, k0, k1, k2)
                fog = (dist - fog_start) / (tmax * dn - fog_start)
                fog = min(max(fog, 0.0), 1.0)
                fog = fog * fog
                cr = cr * (1 - fog) + sr * fog
                cg = cg * (1 - fog) + sg * fog
                cb = cb * (1 - fog) + sb * fog
            rgb[v, u, 0] = np.uint8(min(max(cr, 0.0), 1.0) * 255.0)
            rgb[v, u, 1] = np.uint8(min(max(cg, 0.0), 1.0) * 255.0)
            rgb[v, u, 2] = np.uint8(min(max(cb, 0.0), 1.0) * 255.0)
            depth[v, u] = t
            ids[v, u] = iid


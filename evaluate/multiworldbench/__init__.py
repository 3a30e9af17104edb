"""MultiWorldBench's evaluate home: the ten capabilities of two-view records, from records alone (docs/multiworldbench.md).

Every number says which **path** produced it:

- ``poses (classical)``: camera poses estimated from each player's video by the classical pose extractor of
  :mod:`.classical` (tracked corners, rotation-only vs essential-matrix model), cached per video in the run's feature
  cache; chained and compared with the commanded poses (control isolation, coordination fairness).
- ``measured``: a binary visual judgment measured from pixels, possible on Engine cases because the case says where
  everything must be: the expected world state (the game rules of :func:`~worldgate.trajectories.multiworldbench.world.replay`
  applied to the case's interactions) is ray cast from each player's commanded pose
  (:func:`~worldgate.trajectories.multiworldbench.world.cast_boxes`), which gives, per view and frame, the pixels where a block
  at the marked cross, a structure or the other player's avatar must appear; the video's pixels there are classified
  by chromaticity (shading-invariant) into the case's materials, the cross and the two avatar colours. Block present /
  count / material / location at the cross, structure silhouette and composition, avatar displacement, and colour
  histograms (style) are measured this way.
  The casts depend on the commanded inputs alone and are a cached feature of the record (:mod:`.projection`),
  as are the key frames' chromaticity classes before any threshold (:mod:`.chroma`): ``--rescore`` casts and
  classifies nothing, whatever thresholds it is given.
- ``vlm``: the same binary questions asked to a VLM judge with the prompts in ``prompts/multiworldbench/*.txt``. Used where
  pixels do not suffice (a record without Engine geometry) or when asked for (``judge=``); with no VLM backend
  configured the capability is reported **unavailable with the reason**, never filled in.

Capabilities (0-100, per case, then per run):

- **control isolation** (matched navigation): the target player's pose response e per channel (rotation: mean
  geodesic error / max(commanded rotation path, 10 deg); translation: mean position error after a least-squares scale
  fit / max(commanded path, 0.5 m)); eligible when the commanded reference is repeatable (re-integrating the record's
  action schedule reproduces its commanded poses) and estimable (enough tracked frame pairs). Run value:
  ``100 min over (target role, channel, partner condition) of (1 - min(1, mean e))``.
- **coordination fairness** (matched navigation, partner doing the same action): the two roles' estimated responses to
  the same command: (path distance + path-length difference) / max(mean length, 10 deg) for rotation (0.5 m for
  translation); ``100 (1 - min(1, d))``, the worse channel.
- **cross-view motion**: ``100 q_observer q_actor``: the observer sees the actor's avatar move as commanded
  (measured: avatar pixels before/after, displacement or size change against the projected commanded positions); the
  actor's own view moves as commanded (measured: WorldMark's flow template of the key, classical flow).
- **state synchronization** (shared-state interaction): place = mean of success, count, location, material; destroy =
  mean of success, count, location; a question counts when **both** views answer it as the game state says
  (majority over the final frames).
- **state persistence**: strict product of the operator's and the returning observer's answers (all of them true).
- **structural consistency** (building reveal): per view, the structure matches the reference (silhouette IoU and
  material composition) at frames 80/100/120 (majority); ``100 min(view A, view B)``.
- **spatial reasoning**: ``100 min(A_pred, A_GT) / max(A_pred, A_GT)`` with A the structure's visible area in
  pixels (measured vs ray cast), mean over views and frames.
- **race-condition consistency** (concurrent placement): ``100 1[sum over t in 60/80/100 of v_t a_t u_t >= 2]``:
  the block is visible in both views, both show the same material, and it is unique (one block, nothing beside it).
- **style consistency** (delayed revisit): ``100 (1 - JS)``, JS the base-2 Jensen-Shannon distance between the
  colour histograms of the first observer's view and the returning observer's view at the same pose 70 frames later.
- **ID consistency**: the landmark is the same after the 70-frame gap (measured: its silhouettes and materials in the
  two views agree).

Tracks: navigation (control isolation, coordination fairness, cross-view
motion), shared state (synchronization, persistence, race condition), structure (structural consistency, spatial
reasoning), revisit (style, ID). Overall: the mean of the ten capabilities (as ``worldgate report`` computes it).
"""

"""Lanelet2 maps (Autoware's OSM format): the OSM file (`osm`), Lanelet2's projections restated
(`projection`, `origin`) and the map's elements as an avsim HD map (`hdmap.build_hdmap`)."""

// Lane centres of an OpenDRIVE file computed by libOpenDRIVE (pageldev/libOpenDRIVE), for
// tests/test_opendrive_reference_impl.py. Reads "road_id section_s0 lane_id s" lines on stdin and
// prints "x y z" of the lane centre (t halfway between the lane's borders, h = 0) per line.
#include "OpenDriveMap.h"
#include "Road.h"
#include "LaneSection.h"
#include "Lane.h"

#include <cstdio>
#include <iostream>
#include <string>

int main(int argc, char** argv)
{
    if (argc != 2)
    {
        std::fprintf(stderr, "usage: %s MAP.xodr < queries\n", argv[0]);
        return 2;
    }
    // center_map false: coordinates as in the file; spiral edge cases fixed as libOpenDRIVE's default
    odr::OpenDriveMap map(argv[1], false);
    std::string road_id;
    double      section_s0 = 0, s = 0;
    int         lane_id = 0;
    while (std::cin >> road_id >> section_s0 >> lane_id >> s)
    {
        const odr::Road        road = map.get_road(road_id);
        const odr::LaneSection section = road.s_to_lanesection.at(section_s0);
        const odr::Lane        lane = section.get_lane(lane_id);
        const int              inner_id = lane_id > 0 ? lane_id - 1 : lane_id + 1;
        const double           outer = lane.outer_border.evaluate(s);
        const double inner = inner_id == 0 ? road.lane_offset.evaluate(s) : section.get_lane(inner_id).outer_border.evaluate(s);
        const odr::Vec3D p = road.get_xyz(s, (inner + outer) / 2.0, 0.0);
        std::printf("%.12f %.12f %.12f\n", p[0], p[1], p[2]);
    }
    return 0;
}
